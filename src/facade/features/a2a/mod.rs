//! Every agent over the Agent2Agent protocol (A2A 1.0, JSON-RPC binding; docs/concepts/a2a.md):
//! `GET /a2a/{namespace}/{slug}/.well-known/agent-card.json` answers the agent's card ([`card`]), and
//! `POST /a2a/{namespace}/{slug}` its JSON-RPC methods ([`rpc`]): a message starts a run (a task) in
//! its context (a thread) or answers a task that waits for decisions ([`tasks`]); a task is read,
//! listed, cancelled, and followed as server-sent events ([`stream`]).
//!
//! - Authentication and the share rules are the facade's: a bearer token (a user's, or an OIDC
//!   provider's when one is configured) on every request, 401 without; an agent the caller may not see,
//!   or of another namespace, answers 404 as a missing one; a task of another user, or of another
//!   agent, answers `TaskNotFound` (-32001) as an unknown one.
//! - The run's limits, budgets and quotas are the facade's, as for `POST /api/agent/runs`. What stops a
//!   request before the protocol reads it (401, 413 for a body past `max_body_bytes`, 429 naming its
//!   limit with `Retry-After`, 503 with no run store) is answered as HTTP; everything else as a
//!   JSON-RPC error naming the field (`data.field`).

pub mod card;
pub mod rpc;
pub mod stream;
pub mod tasks;
pub mod view;

use axum::routing::{get, post};
use kube::ResourceExt;

use crate::access::Identity;
use crate::delegation::a2a::rpc::{Code, RpcError};
use crate::facade::http::error::ApiError;
use crate::facade::services::agent_views::visible;
use crate::facade::services::state::FacadeState;
use crate::resources::Agent;

/// Where the agents are served: `/a2a/{namespace}/{slug}`.
pub const A2A_PREFIX: &str = "/a2a";

/// The namespace of agents read from a manifests folder that names none (the local mode).
const DEFAULT_NAMESPACE: &str = "default";

/// The A2A routes: each agent's card and its JSON-RPC endpoint.
pub fn routes() -> axum::Router<FacadeState> {
    axum::Router::new()
        .route("/a2a/{namespace}/{slug}/.well-known/agent-card.json", get(card::card))
        .route("/a2a/{namespace}/{slug}", post(rpc::rpc))
}

/// The agent `slug` of `namespace`, when `who` may see it; 404 as a missing one otherwise.
pub async fn agent_for(state: &FacadeState, who: &Identity, namespace: &str, slug: &str) -> Result<Agent, ApiError> {
    let agent = visible(state.agents.get(slug).await?, who, slug)?;
    if agent.namespace().as_deref().unwrap_or(DEFAULT_NAMESPACE) != namespace {
        return Err(ApiError::NotFound(format!("agent {slug:?} does not exist")));
    }
    Ok(agent)
}

/// Why a request failed: a JSON-RPC error, or a refusal answered as HTTP (authentication, size, rate,
/// an unavailable store).
#[derive(Debug)]
pub enum Failure {
    /// Answered in the JSON-RPC envelope.
    Rpc(RpcError),
    /// Answered as the HTTP status of the facade's other routes.
    Http(ApiError),
}

impl From<RpcError> for Failure {
    fn from(error: RpcError) -> Self {
        Failure::Rpc(error)
    }
}

impl From<crate::store::StoreError> for Failure {
    /// A store that fails, as the facade's other routes answer it.
    fn from(error: crate::store::StoreError) -> Self {
        Failure::from(ApiError::from(error))
    }
}

impl From<ApiError> for Failure {
    /// The facade's refusals as the protocol spells them: 422 is invalid parameters naming the field;
    /// 404 an unknown task (the only thing a request here names that can be missing); 409 an operation
    /// the task's state does not allow; 403 an invalid request; 401, 413, 429 and 503 stay HTTP.
    fn from(error: ApiError) -> Self {
        let rpc = |code, message: String| Failure::Rpc(RpcError::new(code, message));
        match error {
            ApiError::Invalid { field, message } => Failure::Rpc(RpcError::invalid(field, message)),
            ApiError::NotFound(message) => rpc(Code::TaskNotFound, message),
            e @ (ApiError::Conflict(_) | ApiError::RunBusy { .. } | ApiError::RunInterrupted { .. }) => {
                rpc(Code::UnsupportedOperation, e.to_string())
            }
            ApiError::Forbidden(message) | ApiError::BadRequest(message) => rpc(Code::InvalidRequest, message),
            ApiError::BadGateway(message) => rpc(Code::Internal, message),
            other => Failure::Http(other),
        }
    }
}

/// The agent's A2A URL as its client reaches it: the scheme and host the request came by (a proxy's
/// `X-Forwarded-Proto` and `X-Forwarded-Host` when it sets them), and the agent's path.
pub fn agent_url(headers: &axum::http::HeaderMap, namespace: &str, agent: &Agent) -> String {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(',').next().unwrap_or_default().trim().to_string())
    };
    let scheme = header("x-forwarded-proto").filter(|s| s == "https" || s == "http").unwrap_or_else(|| "http".into());
    let host = header("x-forwarded-host")
        .filter(|h| is_host(h))
        .or_else(|| header("host").filter(|h| is_host(h)))
        .unwrap_or_else(|| "localhost".into());
    format!("{scheme}://{host}{A2A_PREFIX}/{namespace}/{}", agent.name_any())
}

/// Whether `host` is a host name (letters, digits, `.`, `-`) or a bracketed IPv6 address, with an
/// optional port, and nothing else.
fn is_host(host: &str) -> bool {
    let (name, port) = match host.rsplit_once(':') {
        Some((name, port))
            if !name.ends_with(':') && (name.starts_with('[') == name.ends_with(']')) && !name.is_empty() =>
        {
            (name, Some(port))
        }
        _ => (host, None),
    };
    let name_ok = match name.strip_prefix('[').and_then(|n| n.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => {
            !name.is_empty()
                && name.len() <= 253
                && name.split('.').all(|label| {
                    !label.is_empty()
                        && label.len() <= 63
                        && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                })
        }
    };
    name_ok && port.is_none_or(|p| p.parse::<u16>().is_ok())
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderMap;

    use super::*;

    #[test]
    fn the_agent_url_follows_the_proxy_and_refuses_a_forged_host() {
        let agent =
            Agent::new("helper", serde_json::from_value(serde_json::json!({"backend": "ChatbotAgent"})).expect("spec"));
        let mut headers = HeaderMap::new();
        headers.insert("host", "facade:8080".parse().expect("value"));
        assert_eq!(agent_url(&headers, "team", &agent), "http://facade:8080/a2a/team/helper");
        headers.insert("x-forwarded-proto", "https".parse().expect("value"));
        headers.insert("x-forwarded-host", "agents.example.com".parse().expect("value"));
        assert_eq!(agent_url(&headers, "team", &agent), "https://agents.example.com/a2a/team/helper");
        headers.insert("x-forwarded-host", "evil.com/steal?".parse().expect("value"));
        headers.insert("x-forwarded-proto", "javascript".parse().expect("value"));
        assert_eq!(agent_url(&headers, "team", &agent), "http://facade:8080/a2a/team/helper");
        for forged in ["[::1]:99:evil", "_", "a..b", "evil.com:99999", "a b"] {
            assert!(!is_host(forged), "{forged}");
        }
        for fine in ["[::1]:8080", "[::1]", "10.0.0.1:80", "agents.example.com"] {
            assert!(is_host(fine), "{fine}");
        }
    }

    #[test]
    fn refusals_read_as_the_protocols_errors_or_stay_http() {
        let code = |e: ApiError| match Failure::from(e) {
            Failure::Rpc(rpc) => Some(rpc.code),
            Failure::Http(_) => None,
        };
        assert_eq!(code(ApiError::invalid("message.parts", "empty")), Some(Code::InvalidParams));
        assert_eq!(code(ApiError::NotFound("x".into())), Some(Code::TaskNotFound));
        assert_eq!(code(ApiError::Conflict("x".into())), Some(Code::UnsupportedOperation));
        assert_eq!(code(ApiError::Unavailable("x".into())), None);
        let limited = ApiError::Limited { limit: "max_runs_per_user".into(), message: "x".into(), retry_after: 1 };
        assert_eq!(code(limited), None, "a limit stays a 429 naming it");
    }
}
