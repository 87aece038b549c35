//! `POST /api/tools/caller_token`: a token of the calling run's user for an MCP server's audience (its
//! `caller` header), from the OIDC issuer the facade trusts ([`crate::facade::http::auth::oidc::exchange`]).
//! Only a run asks (its run token names the user); a person's own token is refused, so nobody gets a
//! token for another audience through here but a run, and a run only its own user's.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};

use crate::facade::http::auth::ParentCaller;
use crate::facade::http::auth::oidc::exchange::ExchangeError;
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::services::state::FacadeState;

/// The body: the audience a token is wanted for.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallerTokenBody {
    /// The MCP server's audience (1 to 256 characters).
    #[schema(min_length = 1, max_length = 256)]
    pub audience: String,
}

/// The answer: the token.
#[derive(Serialize, utoipa::ToSchema)]
pub struct CallerTokenAnswer {
    /// The bearer token of the run's user for the audience.
    pub token: String,
}

/// `POST /api/tools/caller_token`.
#[utoipa::path(
    post,
    path = "/api/tools/caller_token",
    operation_id = "caller_token",
    tag = "tools",
    request_body = CallerTokenBody,
    responses(
        (status = 200, description = "the token", body = CallerTokenAnswer),
        (status = 403, description = "not a run's credentials, or an audience not given out here", body = ErrorBody),
        (status = 422, description = "no audience", body = ErrorBody),
        (status = 503, description = "no OIDC issuer here, no current token of the user, or the issuer failed", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn caller_token(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<CallerTokenBody>,
) -> Result<Json<CallerTokenAnswer>, ApiError> {
    let Some(grant) = caller.run else {
        return Err(ApiError::Forbidden("only a run's credentials may ask for its user's token".into()));
    };
    if body.audience.trim().is_empty() || body.audience.len() > 256 {
        return Err(ApiError::invalid("audience", "name the audience (1 to 256 characters)"));
    }
    let verifier = state
        .auth
        .oidc()
        .ok_or_else(|| ApiError::Unavailable("this facade trusts no OIDC issuer, so it has no user tokens".into()))?;
    match verifier.caller_token(&grant.uid, &body.audience).await {
        Ok(token) => Ok(Json(CallerTokenAnswer { token })),
        Err(err @ ExchangeError::NotAllowed(_)) => Err(ApiError::Forbidden(err.to_string())),
        Err(err) => Err(ApiError::Unavailable(err.to_string())),
    }
}
