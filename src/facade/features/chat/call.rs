//! `POST /api/chat/call`: one question to a model, answered whole (Yuxi's client titles its
//! conversations with it). The facade holds no model client of its own: the command line layer, which
//! holds the runner's, gives it one ([`QuickModel`](crate::facade::services::quick_model::QuickModel));
//! a facade without one (in a cluster, model credentials are the runs') answers 503.
//!
//! A call spends tokens as a run does, under the same rules: the daily quotas are checked first and
//! counted after; a user has at most [`MAX_CHAT_CALLS_PER_USER`] under way; and only an administrator
//! names a model this installation does not offer (the default one and `--models`), as an agent's run is
//! held to its agent's model.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::access::Role;
use crate::facade::http::auth::Caller;
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::request_fields::{is_model_spec, request_id_of};
use crate::facade::services::run_starts::check_quotas;
use crate::facade::services::state::FacadeState;
use crate::run::budget::UsageTarget;

/// The calls one user may have under way on one facade replica (429 `max_chat_calls_per_user`).
pub const MAX_CHAT_CALLS_PER_USER: usize = 2;

/// The longest question, in bytes (Yuxi's client sends at most about 2,000 characters).
pub const MAX_QUERY_BYTES: usize = 16 * 1024;

/// `POST /api/chat/call` body.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallBody {
    /// The question (at most 16 KiB).
    #[schema(min_length = 1, max_length = 16384)]
    pub query: String,
    /// `model_spec` (or `model`): the model to ask; `request_id`: echoed back. Other keys are ignored.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<Map<String, Value>>,
}

/// The answer of `POST /api/chat/call`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CallAnswer {
    /// The model's answer.
    pub response: String,
    /// The request id: `meta.request_id`, or one the facade made.
    pub request_id: String,
}

/// `POST /api/chat/call`: asks a model one question.
#[utoipa::path(
    post,
    path = "/api/chat/call",
    operation_id = "chat_call",
    tag = "chat",
    request_body = CallBody,
    responses(
        (status = 200, description = "the answer", body = CallAnswer),
        (status = 400, description = "malformed body", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 403, description = "`meta.model_spec` names a model this facade does not offer, which only administrators choose", body = ErrorBody),
        (status = 422, description = "`query` empty or too long, `meta.model_spec` not a model", body = ErrorBody),
        (status = 429, description = "a daily token quota is used up, or `max_chat_calls_per_user` calls are under way; `field` names which", body = ErrorBody),
        (status = 502, description = "the model failed", body = ErrorBody),
        (status = 503, description = "this facade asks no model", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn call(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    JsonBody(body): JsonBody<CallBody>,
) -> Result<Json<CallAnswer>, ApiError> {
    let model = state.quick_model.clone().ok_or_else(|| {
        ApiError::Unavailable("this facade asks no model: model credentials are the runs' own here".into())
    })?;
    if body.query.trim().is_empty() {
        return Err(ApiError::invalid("query", "is empty"));
    }
    if body.query.len() > MAX_QUERY_BYTES {
        return Err(ApiError::invalid("query", format!("is longer than {MAX_QUERY_BYTES} bytes")));
    }
    let meta = body.meta.unwrap_or_default();
    let spec = match meta.get("model_spec").or_else(|| meta.get("model")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => None,
        Some(Value::String(s)) if is_model_spec(s) => Some(s.clone()),
        Some(Value::String(s)) if crate::resources::validation::is_dns1123_label(s) => {
            // A Model resource: only one shared with the caller (a missing one answers alike).
            if crate::facade::services::model_access::usable(&state, &who, s).await?.is_none() {
                return Err(ApiError::Forbidden(format!("meta.model_spec: {s:?} is not a Model you may use")));
            }
            Some(s.clone())
        }
        Some(other) => {
            return Err(ApiError::invalid(
                "meta.model_spec",
                format!("{other} is neither <provider>/<model> nor the name of a Model"),
            ));
        }
    };
    let request_id = request_id_of(&meta)?;
    let admin = matches!(who.role, Role::Admin | Role::Superadmin);
    let offered = |named: &str| {
        named == model.default_model()
            || state.models.offers(named)
            || crate::resources::model::resource_name(named).is_some()
    };
    if let Some(named) = spec.as_deref().filter(|named| !offered(named))
        && !admin
    {
        return Err(ApiError::Forbidden(format!(
            "meta.model_spec: {named:?} is not a model this facade offers; only administrators choose another"
        )));
    }
    let _under_way = state.chat_calls.enter(&who.uid, MAX_CHAT_CALLS_PER_USER, "max_chat_calls_per_user")?;
    check_quotas(&state, &who.uid).await?;
    let model_name = spec.clone().unwrap_or_else(|| model.default_model().to_string());
    let (response, usage) = model.answer(spec, body.query).await.map_err(ApiError::BadGateway)?;
    if let (Some(usage), Ok(store)) = (usage, state.store()) {
        let target = UsageTarget {
            root_run_id: format!("chat-call-{}", who.uid),
            max_tokens: None,
            max_cost: None,
            namespace: state.limits.namespace.clone(),
            uid: who.uid.clone(),
        };
        let day = crate::run::budget::day_of(jiff::Timestamp::now());
        // The answer's cost is not priced here (the quick model gives tokens only); its tokens count.
        let call = crate::run::budget::ModelCall { usage, cost: None, model: model_name, ..Default::default() };
        if let Err(err) = store.record_usage(&target, &call, &day).await {
            tracing::warn!(uid = %who.uid, error = %err, "cannot count a chat call's tokens");
        }
    }
    Ok(Json(CallAnswer { response, request_id }))
}
