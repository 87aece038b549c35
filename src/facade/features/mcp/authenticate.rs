//! The facade's authentication in front of the MCP server ([`authenticate`]): the bearer token of every
//! request, the session's owner, and the count of sessions opened.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::caller::McpCaller;
use super::sessions::{self, Owner, Sessions};
use crate::facade::http::auth::ParentCaller;
use crate::facade::http::error::ApiError;
use crate::facade::services::state::FacadeState;

/// Checks the request's bearer token as every facade route does (401 with the facade's error body),
/// hands the caller to the MCP server in the request's extensions, keeps a session to its owner and
/// counts the sessions opened ([`sessions`]).
pub async fn authenticate(
    State((state, sessions)): State<(FacadeState, Arc<Sessions>)>,
    request: Request,
    next: Next,
) -> Response {
    use axum::extract::FromRequestParts;
    // The server library's `Mcp-Session-Id`, spelled as an HTTP/2 header name must be.
    const HEADER_SESSION_ID: axum::http::HeaderName = axum::http::HeaderName::from_static("mcp-session-id");
    let (mut parts, body) = request.into_parts();
    let caller = match ParentCaller::from_request_parts(&mut parts, &state).await {
        Ok(caller) => caller,
        Err(err) => return err.into_response(),
    };
    let agent = parts
        .uri
        .query()
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .and_then(|pairs| pairs.into_iter().find(|(k, _)| k == "agent").map(|(_, v)| v));
    let owner = Owner::of(&caller);
    let named = parts.headers.get(HEADER_SESSION_ID).map(|v| v.to_str().map(str::to_string));
    let mut place = None;
    match &named {
        // Another caller's session is handed on as one that does not exist, to be answered as one.
        Some(Ok(id)) if !sessions.may_use(id, &owner) => {
            parts.headers.insert(HEADER_SESSION_ID, axum::http::HeaderValue::from_static(sessions::NO_SESSION));
        }
        Some(Ok(_)) => {}
        // The server library reads a session id it cannot read as none, and would open a session
        // uncounted and unowned.
        Some(Err(_)) => {
            return ApiError::BadRequest("the Mcp-Session-Id header is not visible ASCII".into()).into_response();
        }
        // A POST without a session may open one (`initialize`).
        None if parts.method == axum::http::Method::POST => match sessions.take_place(&owner, &state.limits).await {
            Ok(taken) => place = Some(taken),
            Err(err) => return err.into_response(),
        },
        None => {}
    }
    let ending_session = parts.method == axum::http::Method::DELETE;
    parts.extensions.insert(McpCaller { caller, agent });
    let mut response = next.run(Request::from_parts(parts, body)).await;
    if let Some(place) = place {
        let opened = response.headers().get(HEADER_SESSION_ID).and_then(|v| v.to_str().ok());
        place.settle(opened.filter(|_| response.status().is_success()));
    }
    // A session's end is answered 202 by the server library; clients (the Python SDK among them) take
    // 200 or 204 as done, and 204 is what it is: nothing to say.
    if ending_session && response.status() == axum::http::StatusCode::ACCEPTED {
        if let Some(Ok(id)) = &named
            && sessions.may_use(id, &owner)
        {
            sessions.forget(id);
        }
        *response.status_mut() = axum::http::StatusCode::NO_CONTENT;
    }
    response
}
