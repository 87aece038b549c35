//! The facade: the Yuxi-compatible HTTP API (`/api/agent`, `/api/chat`, `/api/knowledge`, the subagent
//! and knowledge tools at `/api/tools`, and the same tools over MCP at `/mcp`), served by axum, with its
//! OpenAPI document, its docs UI and the web console.
//!
//! # Layers
//!
//! Arrows point down only; a test (`layer_rule`) reads the sources and fails on one that does not.
//!
//! ```text
//! the root: mod.rs, router.rs (the one place the routes are assembled), openapi.rs
//!   -> features/<name>/   one folder per feature, each exporting routes(); never another feature
//!   -> services/          the state and the logic several features share; never a feature or the root
//!   -> http/              the kernel: errors, extractors, limits, auth, OpenAPI glue, metrics
//! ```
//!
//! A reference from one unit to another is written `crate::facade::{http|services|features::<name>}::...`;
//! `super::` stays inside its unit.

pub mod features;
pub mod http;
pub mod services;

mod openapi;
mod router;

pub use self::http::auth::Users;
pub use self::http::error::ApiError;
pub use self::http::limits::{BODY_READ_TIMEOUT, MAX_BODY_BYTES};
pub use router::{MAX_DOCUMENT_BODY_BYTES, OPENAPI_PATH, api, router};
pub use services::catalog::AgentCatalog;
pub use services::state::{FacadeParts, FacadeState, Runs};
