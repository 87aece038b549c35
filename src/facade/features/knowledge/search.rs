//! `POST /api/knowledge/{slug}/search`: the best passages of a knowledge base the caller may read.

use super::access::readable;
use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use crate::facade::http::auth::Caller;
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::knowledge::SearchError;
use crate::facade::services::knowledge::search::{Passage, check_search, passages};
use crate::facade::services::state::FacadeState;

/// A search.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchBody {
    /// What to look for, in words (no query syntax; some text besides spaces).
    #[schema(min_length = 1, max_length = 2000, pattern = "\\S")]
    pub query: String,
    /// How many passages, 1 to 20 (default 5).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 20)]
    pub top_k: Option<u32>,
}

/// The answer of a search.
#[derive(Serialize, utoipa::ToSchema)]
pub struct SearchAnswer {
    /// The passages, best first.
    pub results: Vec<Passage>,
}

/// `POST /api/knowledge/{slug}/search`: the best passages of a knowledge base the caller may read.
#[utoipa::path(
    post,
    path = "/api/knowledge/{slug}/search",
    operation_id = "search_knowledge_base",
    tag = "knowledge",
    params(("slug" = String, Path, description = "the knowledge base's slug")),
    request_body = SearchBody,
    responses(
        (status = 200, description = "the passages, best first", body = SearchAnswer),
        (status = 404, description = "unknown, or not readable by the caller", body = ErrorBody),
        (status = 409, description = "not ready: its documents cannot be read", body = ErrorBody),
        (status = 422, description = "a bad `query` or `top_k`", body = ErrorBody),
        (status = 502, description = "its retrieval service failed", body = ErrorBody),
        (status = 503, description = "no knowledge bases here, or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn search(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    Path(slug): Path<String>,
    JsonBody(body): JsonBody<SearchBody>,
) -> Result<Json<SearchAnswer>, ApiError> {
    let knowledge = state.knowledge()?;
    let kb = readable(knowledge.catalog.get(&slug).await?, &who, &slug)?;
    let top_k = check_search(&body.query, body.top_k)?;
    let hits = knowledge.search(&kb, &body.query, top_k).await.map_err(|err| match err {
        SearchError::NotReady { .. } => ApiError::Conflict(err.to_string()),
        SearchError::Service { .. } => ApiError::BadGateway(err.to_string()),
    })?;
    Ok(Json(SearchAnswer { results: passages(&slug, hits) }))
}
