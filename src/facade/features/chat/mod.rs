//! Yuxi's chat-thread routes (`/api/chat/thread...`): create, list, retitle or pin, delete and mark
//! viewed ([`threads`]); search ([`search`]); history and state ([`history`]); a rating of an answer
//! ([`feedback`]); and one question to a model (`POST /api/chat/call`, [`call`]). A thread's attachments
//! and images are the attachments feature's.

pub mod call;
pub mod feedback;
pub mod history;
pub mod search;
pub mod threads;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::facade::services::state::FacadeState;

/// Appends this feature's routes to `api`, in the order the OpenAPI document lists them.
pub fn routes(api: OpenApiRouter<FacadeState>) -> OpenApiRouter<FacadeState> {
    api.routes(routes!(threads::create))
        .routes(routes!(threads::list))
        .routes(routes!(search::search))
        .routes(routes!(threads::update, threads::delete))
        .routes(routes!(threads::viewed))
        .routes(routes!(history::history))
        .routes(routes!(history::thread_state))
        .routes(routes!(feedback::submit, feedback::status))
        .routes(routes!(call::call))
}
