//! The facade's errors, mapped to HTTP status in one place. Every error answers JSON
//! `{"code": ..., "message": ..., "field": ..., "detail": ...}`, the field present when one is at fault,
//! and `detail` as FastAPI (Yuxi's server) spells it, for Yuxi's clients: for a 422 a list of
//! `{loc, msg, type}` naming the field (`loc: ["body", "context", "tools", 0]`); for `run_busy` and
//! `run_interrupted` an object with the same fields as the answer; for any other error the message.
//!
//! The errors of what the facade calls convert to [`ApiError`], so handlers use `?`: the run store's here,
//!
//! | from | answer |
//! |---|---|
//! | [`StoreError`] (any) | 503 `unavailable`, "the run store failed: ..." |
//!
//! and the catalog's beside the catalog ([`crate::facade::services::catalog::fields`]), since the kernel
//! names no service.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::store::StoreError;

/// An error answered to a client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// No bearer token, or one that names nobody (401).
    #[error("{0}")]
    Unauthorized(String),
    /// The caller may see the thing but not do this to it (403).
    #[error("{0}")]
    Forbidden(String),
    /// Unknown, or invisible to the caller (404): the two answer alike.
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with the state (409).
    #[error("{0}")]
    Conflict(String),
    /// The body is not JSON, or not of the expected shape (400).
    #[error("{0}")]
    BadRequest(String),
    /// The body is larger than the facade accepts (413).
    #[error("{0}")]
    TooLarge(String),
    /// The route exists, but not for this method (405).
    #[error("{0}")]
    MethodNotAllowed(String),
    /// The client took longer than the facade waits to send its request body (408).
    #[error("{0}")]
    Timeout(String),
    /// A limit is reached (429): `limit` names it (its setting), `retry_after` says in how many seconds
    /// to try again (the `Retry-After` header).
    #[error("{limit}: {message}")]
    Limited {
        /// The limit, by the name of its setting, such as `max_runs_per_user`.
        limit: String,
        /// What is at the limit.
        message: String,
        /// Seconds until a retry may succeed.
        retry_after: u64,
    },
    /// A service the facade depends on (the run store) failed or is not configured (503).
    #[error("{0}")]
    Unavailable(String),
    /// A service the facade asked for the caller (a model) failed (502).
    #[error("{0}")]
    BadGateway(String),
    /// The thread already has an unfinished run (409, code `run_busy`).
    #[error(
        "thread {thread_id:?} already has the unfinished run {active_run_id}; await or cancel it, or use another thread"
    )]
    RunBusy {
        /// The thread.
        thread_id: String,
        /// Its unfinished run.
        active_run_id: String,
        /// That run's status.
        active_run_status: String,
        /// The agent asked for.
        agent_slug: String,
    },
    /// The thread's run waits for its user's decisions on its tool calls (409, code `run_interrupted`,
    /// Yuxi's): a new message is neither started nor queued until they are given (or the run cancelled).
    #[error(
        "thread {thread_id:?} has the run {active_run_id} waiting for your decisions on its tool calls; decide on them or cancel the run first"
    )]
    RunInterrupted {
        /// The thread.
        thread_id: String,
        /// Its waiting run.
        active_run_id: String,
        /// The agent asked for.
        agent_slug: String,
    },
    /// The request is well-formed but breaks a rule (422); `field` names the field.
    #[error("{field}: {message}")]
    Invalid {
        /// The field, in the request's own spelling.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// The body of every error answer.
#[derive(Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// Machine-readable: `unauthorized`, `forbidden`, `not_found`, `conflict`, `bad_request`,
    /// `payload_too_large`, `rate_limited`, `run_busy`, `run_interrupted`, `unavailable`, `bad_gateway` or
    /// `validation_failed`.
    pub code: &'static str,
    /// What went wrong, for a person.
    pub message: String,
    /// The field at fault (`validation_failed` only), in the request's own spelling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// `run_busy` only: the thread's unfinished run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_run_id: Option<String>,
    /// `run_busy` only: that run's status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_run_status: Option<String>,
    /// `run_busy` only: the agent asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_slug: Option<String>,
    /// `run_busy` only: the thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    /// The error as FastAPI answers it (see the module doc): a string, a list of [`DetailItem`] (422),
    /// or an object (`run_busy`).
    #[schema(schema_with = detail_schema)]
    pub detail: serde_json::Value,
}

/// The schema of [`ErrorBody::detail`]: a string, a list of [`DetailItem`], or an object.
fn detail_schema() -> utoipa::openapi::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    use utoipa::openapi::{Ref, Schema};
    let one_of = OneOfBuilder::new()
        .item(Schema::Object(ObjectBuilder::new().schema_type(Type::String).build()))
        .item(Schema::Array(ArrayBuilder::new().items(Ref::from_schema_name("DetailItem")).build()))
        .item(Schema::Object(ObjectBuilder::new().schema_type(Type::Object).build()))
        .description(Some("a string, a list of `DetailItem` (422), or an object (`run_busy`)"))
        .build();
    Schema::OneOf(one_of)
}

/// The schema of [`DetailItem::loc`]: a list of names (strings) and indexes (integers).
fn loc_schema() -> utoipa::openapi::schema::Array {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    let part = OneOfBuilder::new()
        .item(ObjectBuilder::new().schema_type(Type::String))
        .item(ObjectBuilder::new().schema_type(Type::Integer).minimum(Some(0)));
    ArrayBuilder::new().items(part).build()
}

/// One item of a 422's `detail`, as FastAPI spells a validation error.
#[derive(Serialize, utoipa::ToSchema)]
pub struct DetailItem {
    /// Where: `"body"`, then the field's path, a name per object level and a number per list index.
    #[schema(schema_with = loc_schema)]
    pub loc: Vec<serde_json::Value>,
    /// What is wrong.
    pub msg: String,
    /// The kind of error: always `value_error`.
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// The `loc` of a field path in the request's own spelling: `context.tools[0]` is
/// `["body", "context", "tools", 0]`; a query parameter's field is spelled `query.<name>`, a header's
/// `header.<Name>`.
pub fn field_loc(field: &str) -> Vec<serde_json::Value> {
    let mut loc = Vec::new();
    let (first, rest) = match (field.strip_prefix("query."), field.strip_prefix("header.")) {
        (Some(rest), _) => ("query", rest),
        // A header's name is one part, dots and all.
        (_, Some(name)) => return vec![serde_json::Value::from("header"), serde_json::Value::from(name)],
        (None, None) => ("body", field),
    };
    loc.push(serde_json::Value::from(first));
    for part in rest.split('.').filter(|p| !p.is_empty()) {
        let (name, indexes) = part.split_once('[').map_or((part, ""), |(n, i)| (n, i));
        if !name.is_empty() {
            loc.push(serde_json::Value::from(name));
        }
        for index in indexes.split('[').map(|i| i.trim_end_matches(']')).filter(|i| !i.is_empty()) {
            match index.parse::<u64>() {
                Ok(n) => loc.push(serde_json::Value::from(n)),
                Err(_) => loc.push(serde_json::Value::from(index)),
            }
        }
    }
    loc
}

impl ApiError {
    /// A 422 `validation_failed` naming `field` (in the request's own spelling) and what is wrong with it.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        ApiError::Invalid { field: field.into(), message: message.into() }
    }

    /// The HTTP status and the machine-readable code.
    pub fn status(&self) -> (StatusCode, &'static str) {
        match self {
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, "unauthorized"),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, "forbidden"),
            ApiError::NotFound(_) => (StatusCode::NOT_FOUND, "not_found"),
            ApiError::Conflict(_) => (StatusCode::CONFLICT, "conflict"),
            ApiError::RunBusy { .. } => (StatusCode::CONFLICT, "run_busy"),
            ApiError::RunInterrupted { .. } => (StatusCode::CONFLICT, "run_interrupted"),
            ApiError::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            ApiError::TooLarge(_) => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            ApiError::MethodNotAllowed(_) => (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            ApiError::Timeout(_) => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            ApiError::Limited { .. } => (StatusCode::TOO_MANY_REQUESTS, "rate_limited"),
            ApiError::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            ApiError::BadGateway(_) => (StatusCode::BAD_GATEWAY, "bad_gateway"),
            ApiError::Invalid { .. } => (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed"),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status();
        let field = match &self {
            ApiError::Invalid { field, .. } => Some(field.clone()),
            ApiError::Limited { limit, .. } => Some(limit.clone()),
            _ => None,
        };
        let retry_after = match &self {
            ApiError::Limited { retry_after, .. } => Some(*retry_after),
            _ => None,
        };
        let waiting = "waiting".to_string();
        let busy = match &self {
            ApiError::RunBusy { active_run_id, active_run_status, agent_slug, thread_id } => {
                Some((active_run_id, active_run_status, agent_slug, thread_id))
            }
            ApiError::RunInterrupted { active_run_id, agent_slug, thread_id } => {
                Some((active_run_id, &waiting, agent_slug, thread_id))
            }
            _ => None,
        };
        let message = self.to_string();
        let detail = match (&self, busy) {
            (ApiError::Invalid { field, message }, _) => {
                serde_json::json!([DetailItem { loc: field_loc(field), msg: message.clone(), kind: "value_error" }])
            }
            (_, Some((active_run_id, active_run_status, agent_slug, thread_id))) => serde_json::json!({
                "code": code, "message": message, "active_run_id": active_run_id,
                "active_run_status": active_run_status, "agent_slug": agent_slug, "thread_id": thread_id,
            }),
            _ => serde_json::Value::from(message.clone()),
        };
        let mut response = (
            status,
            Json(ErrorBody {
                code,
                message,
                field,
                active_run_id: busy.map(|b| b.0.clone()),
                active_run_status: busy.map(|b| b.1.clone()),
                agent_slug: busy.map(|b| b.2.clone()),
                thread_id: busy.map(|b| b.3.clone()),
                detail,
            }),
        )
            .into_response();
        if let Some(seconds) = retry_after {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from(seconds));
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert("www-authenticate", axum::http::HeaderValue::from_static("Bearer"));
        }
        response
    }
}

/// A failure of the run store: 503, whatever failed.
impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        ApiError::Unavailable(format!("the run store failed: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_failures_answer_as_before() {
        let answer = |err: ApiError| (err.status().0.as_u16(), err.to_string());
        let store = StoreError::Socket { path: "/run/store.sock".into(), message: "broken pipe".into() };
        assert_eq!(
            answer(store.into()),
            (503, "the run store failed: store socket /run/store.sock: broken pipe".into())
        );
    }

    fn body_of(err: ApiError) -> serde_json::Value {
        let response = err.into_response();
        let bytes = futures::executor::block_on(axum::body::to_bytes(response.into_body(), 1 << 20)).expect("body");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[test]
    fn a_422_names_its_field_as_fastapi_does_and_as_before() {
        let body = body_of(ApiError::invalid("config_json.context.tools[2]", "unknown tool \"x\""));
        assert_eq!(
            (body["code"].as_str(), body["field"].as_str()),
            (Some("validation_failed"), Some("config_json.context.tools[2]"))
        );
        assert_eq!(
            body["detail"],
            serde_json::json!([{"loc": ["body", "config_json", "context", "tools", 2], "msg": "unknown tool \"x\"", "type": "value_error"}])
        );
        assert_eq!(field_loc("query.after_seq"), vec![serde_json::json!("query"), serde_json::json!("after_seq")]);
        assert_eq!(
            field_loc("header.Last-Event-ID"),
            vec![serde_json::json!("header"), serde_json::json!("Last-Event-ID")]
        );
        assert_eq!(
            field_loc("a[0][1]"),
            vec![serde_json::json!("body"), serde_json::json!("a"), serde_json::json!(0), serde_json::json!(1)]
        );
    }

    #[test]
    fn other_errors_carry_their_message_as_detail_and_run_busy_its_fields() {
        let body = body_of(ApiError::NotFound("no such run".into()));
        assert_eq!((body["detail"].as_str(), body["message"].as_str()), (Some("no such run"), Some("no such run")));
        let busy = ApiError::RunBusy {
            thread_id: "t1".into(),
            active_run_id: "r1".into(),
            active_run_status: "running".into(),
            agent_slug: "helper".into(),
        };
        let body = body_of(busy);
        assert_eq!(body["detail"]["code"], "run_busy");
        assert_eq!(body["detail"]["active_run_id"], "r1");
        assert_eq!(body["active_run_id"], "r1");
        let waiting = ApiError::RunInterrupted {
            thread_id: "t1".into(),
            active_run_id: "r1".into(),
            agent_slug: "helper".into(),
        };
        let body = body_of(waiting);
        assert_eq!(
            (body["code"].as_str(), body["detail"]["code"].as_str(), body["detail"]["active_run_status"].as_str()),
            (Some("run_interrupted"), Some("run_interrupted"), Some("waiting"))
        );
    }
}
