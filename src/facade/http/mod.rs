//! The facade's HTTP kernel: what every route shares and no route owns. It names no service, no feature
//! and nothing of the facade's root, so any unit above may use it.
//!
//! - [`error`]: the error answer of every route ([`error::ApiError`]) and the run store's conversion to it;
//! - [`intake`]: how a request's body is taken: the caller authenticated from the headers first, then a
//!   body within a size by caller and route, a deadline, and the process's budget of bytes in memory;
//! - [`body`]: the JSON body and query extractors, whose every failure is a 4xx naming the problem;
//! - [`limits`]: the abuse limits and the body bounds;
//! - [`auth`]: bearer-token authentication and the caller extractors ([`auth::Caller`],
//!   [`auth::ParentCaller`]);
//! - [`openapi`]: what the OpenAPI document states about every route at once;
//! - [`metrics`]: the HTTP metrics and `/metrics`.

pub mod auth;
pub mod body;
pub mod error;
pub mod intake;
pub mod limits;
pub mod metrics;
pub mod openapi;
pub mod trace;
