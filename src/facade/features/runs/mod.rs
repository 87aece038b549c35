//! A user's runs as Yuxi's client starts and follows them: the start (`POST /api/agent/runs`, [`start`],
//! with its body in [`request`] and a resume's decisions in [`crate::facade::services::approvals`]), the
//! list of runs on the same path ([`list`]), a run and its result
//! ([`read`]), its event stream and the thread's messages ([`events`], in the wire shapes of [`wire`]),
//! and the queued requests ([`requests`]). A run of another user answers as a missing one ([`crate::facade::services::owned_runs`]).

pub mod events;
pub mod list;
pub mod read;
pub mod request;
pub mod requests;
pub mod start;
pub mod started;
pub mod trace;
pub mod wire;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(start::start, list::list))
        .routes(routes!(read::get))
        .routes(routes!(read::result))
        .routes(routes!(read::cancel))
        .routes(routes!(read::active_run))
        .routes(routes!(trace::trace))
        .routes(routes!(events::events))
        .routes(routes!(events::thread_messages))
        .routes(routes!(requests::get_request))
        .routes(routes!(requests::request_events))
        .routes(routes!(requests::cancel_request))
        .routes(routes!(requests::steer_request))
        .routes(routes!(requests::thread_requests))
        .routes(routes!(requests::continue_queue))
}
