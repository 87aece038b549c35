//! The runs' retrieval tool: `GET /api/tools/knowledge_bases` (which knowledge bases an agent's run may
//! search, the tool's schema and the prompt section) and `POST /api/tools/knowledge_search`.
//!
//! Both are thin handlers over [`crate::facade::services::run_knowledge`], which `/mcp` calls too. The
//! knowledge bases are resolved there, for the caller's user, under the share rules and the agent's
//! `context.knowledges` ([`crate::access::allowed_knowledge_bases`]): a run never searches a knowledge
//! base its user may not read, whatever its model asks. The caller names the agent: a run its own (any
//! other is refused), a user one it may read. A knowledge base asked for that is not among the allowed
//! ones, or that cannot answer, is an entry of `errors` the model reads, never a failed call.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;

use crate::facade::http::auth::ParentCaller;
use crate::facade::http::body::{JsonBody, QueryParams};
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::run_knowledge::{self, BasesAnswer, KnowledgeSearchAnswer, KnowledgeSearchBody};
use crate::facade::services::state::FacadeState;

/// `GET /api/tools/knowledge_bases` query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct BasesQuery {
    /// The agent whose run searches (with run credentials, the run's own).
    pub agent: String,
}

/// `GET /api/tools/knowledge_bases[?agent=<slug>]`: the knowledge bases a run of the agent may search,
/// the tool and the prompt section.
#[utoipa::path(
    get,
    path = "/api/tools/knowledge_bases",
    operation_id = "list_run_knowledge_bases",
    tag = "tools",
    params(BasesQuery),
    responses(
        (status = 200, description = "the knowledge bases, the tool and the prompt section", body = BasesAnswer),
        (status = 404, description = "the agent is unknown or not readable", body = ErrorBody),
        (status = 422, description = "run credentials of another agent", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn bases(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    QueryParams(query): QueryParams<BasesQuery>,
) -> Result<Json<BasesAnswer>, ApiError> {
    run_knowledge::bases(&state, &caller, &query.agent).await.map(Json)
}

/// `POST /api/tools/knowledge_search`: searches the knowledge bases the run may search (those named, or
/// all of them).
#[utoipa::path(
    post,
    path = "/api/tools/knowledge_search",
    operation_id = "knowledge_search",
    tag = "tools",
    request_body = KnowledgeSearchBody,
    responses(
        (status = 200, description = "the passages, and the knowledge bases that could not answer", body = KnowledgeSearchAnswer),
        (status = 404, description = "the agent is unknown or not readable", body = ErrorBody),
        (status = 422, description = "a bad `query`, `top_k` or `knowledge_bases`", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn search(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<KnowledgeSearchBody>,
) -> Result<Json<KnowledgeSearchAnswer>, ApiError> {
    run_knowledge::search(&state, &caller, body).await.map(Json)
}
