//! A person's rating of an answer, as Yuxi's client sends it (`POST /api/chat/message/{message_id}/feedback`
//! `{rating: like | dislike, reason?}`) and asks for it (`GET` the same). This system keeps no ratings:
//! a message's id is its place in its own conversation's history (so an id alone names no message), and
//! there is no store of ratings. A rating is checked, written to the facade's log (target
//! `yuxi_operator::feedback`, with the user, the message id, the rating and the reason) for an operator to
//! collect, and answered in Yuxi's shape; asking for one answers that there is none.

use axum::Json;
use axum::extract::Path;
use serde::{Deserialize, Serialize};

use crate::facade::http::auth::Caller;
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};

/// The longest `reason`, in characters.
pub const MAX_REASON_CHARS: usize = 2000;

/// A rating.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Rating {
    /// The answer helped.
    Like,
    /// It did not.
    Dislike,
}

/// `POST .../feedback` body (Yuxi's `MessageFeedbackRequest`).
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FeedbackBody {
    /// `like` or `dislike`.
    pub rating: Rating,
    /// Why, for a dislike (at most 2000 characters).
    #[serde(default)]
    #[schema(max_length = 2000)]
    pub reason: Option<String>,
}

/// The answer of `POST .../feedback` (Yuxi's `MessageFeedbackResponse`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct FeedbackAnswer {
    /// Always 0: ratings are not kept.
    pub id: u64,
    /// The message rated.
    pub message_id: i64,
    /// `like` or `dislike`.
    pub rating: Rating,
    /// Why.
    pub reason: Option<String>,
    /// When it was given, RFC 3339.
    pub created_at: String,
}

/// The answer of `GET .../feedback`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct FeedbackStatus {
    /// Always false: ratings are not kept.
    pub has_feedback: bool,
    /// Always `null`.
    #[schema(value_type = Option<Object>)]
    pub feedback: Option<serde_json::Value>,
}

/// `message_id` as a number from 1 (an `int64`, as the document states). Errors: 422 naming
/// `message_id`.
fn message_number(message_id: &str) -> Result<i64, ApiError> {
    message_id
        .parse::<i64>()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| ApiError::invalid("message_id", format!("{message_id:?} is not a message id (a number from 1)")))
}

/// `POST /api/chat/message/{message_id}/feedback`.
#[utoipa::path(
    post,
    path = "/api/chat/message/{message_id}/feedback",
    operation_id = "submit_message_feedback",
    tag = "chat",
    params(("message_id" = i64, Path, minimum = 1, description = "the message's id in its history, from 1")),
    request_body = FeedbackBody,
    responses(
        (status = 200, description = "the rating, logged (not kept)", body = FeedbackAnswer),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 422, description = "`message_id` not a number, `rating` not like or dislike, `reason` too long", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn submit(
    Caller(who): Caller,
    Path(message_id): Path<String>,
    JsonBody(body): JsonBody<FeedbackBody>,
) -> Result<Json<FeedbackAnswer>, ApiError> {
    let message_id = message_number(&message_id)?;
    if body.reason.as_deref().is_some_and(|r| r.chars().count() > MAX_REASON_CHARS) {
        return Err(ApiError::invalid("reason", format!("is longer than {MAX_REASON_CHARS} characters")));
    }
    tracing::info!(
        target: "yuxi_operator::feedback",
        uid = %who.uid,
        message_id,
        rating = ?body.rating,
        reason = body.reason.as_deref().unwrap_or_default(),
        "a rating of an answer"
    );
    Ok(Json(FeedbackAnswer {
        id: 0,
        message_id,
        rating: body.rating,
        reason: body.reason,
        created_at: jiff::Timestamp::now().to_string(),
    }))
}

/// `GET /api/chat/message/{message_id}/feedback`.
#[utoipa::path(
    get,
    path = "/api/chat/message/{message_id}/feedback",
    operation_id = "get_message_feedback",
    tag = "chat",
    params(("message_id" = i64, Path, minimum = 1, description = "the message's id in its history, from 1")),
    responses(
        (status = 200, description = "always none: ratings are not kept", body = FeedbackStatus),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 422, description = "`message_id` is not a number", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn status(Caller(_): Caller, Path(message_id): Path<String>) -> Result<Json<FeedbackStatus>, ApiError> {
    message_number(&message_id)?;
    Ok(Json(FeedbackStatus { has_feedback: false, feedback: None }))
}
