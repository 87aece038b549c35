//! The McpServer discovery: keeps every McpServer's status true to what the server offers
//! (docs/concepts/mcp.md#mcp-servers-as-resources).
//!
//! - `Accepted`: the spec follows the rules ([`validate_mcp_server`]) and every Secret key a header
//!   names exists in the namespace.
//! - `Ready`: the last discovery connected and listed the tools, which the status lists with their
//!   hints; `False` with the reason when it could not; `Unknown` while the server is not accepted, or
//!   when a header is a user's own token (`caller`), which only a run has.
//!
//! A server is listed when its spec changes, when it announces a change of its tools
//! (`notifications/tools/list_changed`, followed by [`super::mcp_changes`]), and every
//! `refreshSeconds` (5 minutes by default), so a tool added or removed at the server shows without a
//! restart. Header values are read for the
//! discovery and dropped; none reaches the status, an event or a log.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use reqwest::header::{HeaderName, HeaderValue};
use serde_json::json;

use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;

use super::decide::set_condition;
use super::mcp_changes::Changes;
use super::metrics::ControllerMetrics;
use crate::endpoints::mcp_discovery::{Discovery, Headers, discover};
use crate::resources::mcp_server::{ACCEPTED, McpServer, McpServerStatus, READY};
use crate::resources::names::FIELD_MANAGER;
use crate::resources::validation::validate_mcp_server;

/// The kind, in metrics.
const KIND: &str = "McpServer";
/// How soon a failed reconcile is tried again.
const RETRY: Duration = Duration::from_secs(30);

/// What a discovery came to: the server's offer, why it could not be asked (`Unknown`), or why it
/// failed.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// It answered.
    Listed(Discovery),
    /// It was not asked: the reason and message.
    NotAsked(&'static str, String),
    /// It did not answer: the reason and message.
    Failed(&'static str, String),
}

/// The status of `server` after judging its spec (`accepted`: `Ok`, or the reason and message of its
/// refusal) and its discovery's `outcome`; conditions keep their transition times while their status
/// stays.
pub fn status_after(
    server: &McpServer,
    accepted: Result<(), (&'static str, String)>,
    outcome: Option<&Outcome>,
    now: jiff::Timestamp,
) -> McpServerStatus {
    let mut status = server.status.clone().unwrap_or_default();
    status.observed_generation = server.metadata.generation;
    status.url = Some(server.endpoint());
    let conditions = &mut status.conditions;
    match &accepted {
        Ok(()) => set_condition(conditions, ACCEPTED, "True", "Valid", "the spec is valid and its Secrets exist", now),
        Err((reason, message)) => set_condition(conditions, ACCEPTED, "False", reason, message, now),
    }
    match (accepted, outcome) {
        (Err(_), _) => {
            set_condition(
                conditions,
                READY,
                "Unknown",
                "NotAccepted",
                "not listed while the server is not accepted",
                now,
            );
        }
        (Ok(()), Some(Outcome::Listed(found))) => {
            let message = format!("{} tools listed", found.count);
            set_condition(conditions, READY, "True", "Listed", &message, now);
            status.tools = found.tools.clone();
            status.tool_count = Some(found.count as i32);
            status.protocol_version = Some(found.protocol_version.clone()).filter(|v| !v.is_empty());
            status.server_name = Some(found.server_name.clone()).filter(|v| !v.is_empty());
            status.last_check_time = Some(Time(now));
            status.last_error = None;
        }
        (Ok(()), Some(Outcome::NotAsked(reason, message))) => {
            set_condition(conditions, READY, "Unknown", reason, message, now);
        }
        (Ok(()), Some(Outcome::Failed(reason, message))) => {
            set_condition(conditions, READY, "False", reason, message, now);
            status.last_check_time = Some(Time(now));
            status.last_error = Some(message.clone());
        }
        (Ok(()), None) => {}
    }
    // The TOOLS column says 0 until a listing found some.
    status.tool_count.get_or_insert(0);
    status
}

/// How often a server the operator runs is listed while it does not answer yet (its pods starting).
pub const DEPLOYED_RETRY: Duration = Duration::from_secs(10);

/// How often `server` is listed: its `refreshSeconds`, or [`DEPLOYED_RETRY`] while a server the
/// operator runs has not answered.
pub fn listing_interval(server: &McpServer) -> Duration {
    let ready = server.status.iter().flat_map(|s| &s.conditions).any(|c| c.type_ == READY && c.status == "True");
    match (&server.spec.deploy, ready) {
        (Some(_), false) => DEPLOYED_RETRY,
        _ => Duration::from_secs(server.spec.refresh_seconds().into()),
    }
}

/// How long until `server` is to be listed again: zero when its spec changed since the last listing, or
/// it was never listed; otherwise what is left of its refresh interval.
pub fn next_listing(server: &McpServer, now: jiff::Timestamp) -> Duration {
    let status = server.status.clone().unwrap_or_default();
    let (Some(checked), true) = (status.last_check_time, status.observed_generation == server.metadata.generation)
    else {
        return Duration::ZERO;
    };
    let interval = listing_interval(server);
    let due = checked.0 + jiff::SignedDuration::try_from(interval).unwrap_or_default();
    let left = now.duration_until(due);
    if left.is_negative() { Duration::ZERO } else { left.unsigned_abs() }
}

struct Context {
    client: kube::Client,
    metrics: ControllerMetrics,
    changes: Arc<Changes>,
}

/// Why a reconcile failed (the Kubernetes API); retried.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct DiscoveryError(#[from] kube::Error);

/// Lists the McpServers of `namespaces` (all when `None`) until `shutdown` resolves.
pub async fn run(
    client: kube::Client,
    namespaces: Option<Vec<String>>,
    metrics: ControllerMetrics,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + Clone + 'static,
) {
    let (changes, changed) = Changes::new();
    let context = Arc::new(Context { client: client.clone(), metrics, changes: changes.clone() });
    let apis: Vec<Api<McpServer>> = super::watched_apis(&client, namespaces.as_deref());
    // Each namespace's controller takes the changes of its own servers.
    let mut routes: Vec<(Option<String>, mpsc::UnboundedSender<ObjectRef<McpServer>>)> = Vec::new();
    let mut controllers = Vec::new();
    for (i, api) in apis.into_iter().enumerate() {
        let (send, receive) = mpsc::unbounded_channel();
        routes.push((namespaces.as_ref().and_then(|n| n.get(i).cloned()), send));
        let controller = Controller::new(api, watcher::Config::default());
        changes.watch_store(controller.store());
        controllers.push(
            controller
                .reconcile_on(futures::stream::unfold(receive, |mut r| async move { r.recv().await.map(|at| (at, r)) }))
                .graceful_shutdown_on(shutdown.clone())
                .run(reconcile, error_policy, context.clone())
                .for_each(|_| async {}),
        );
    }
    tokio::spawn(route_changes(changed, routes));
    futures::future::join_all(controllers).await;
    tracing::info!("the McpServer discovery stopped");
}

/// Sends each server announced changed to the controller of its namespace (the one of all namespaces
/// when there is one).
async fn route_changes(
    mut changed: mpsc::UnboundedReceiver<ObjectRef<McpServer>>,
    routes: Vec<(Option<String>, mpsc::UnboundedSender<ObjectRef<McpServer>>)>,
) {
    while let Some(at) = changed.recv().await {
        let route = routes.iter().find(|(namespace, _)| namespace.is_none() || *namespace == at.namespace);
        if let Some((_, send)) = route {
            let _ = send.send(at);
        }
    }
}

async fn reconcile(server: Arc<McpServer>, context: Arc<Context>) -> Result<Action, DiscoveryError> {
    let started = std::time::Instant::now();
    let outcome = reconcile_inner(&server, &context).await;
    context.metrics.reconciled(KIND, started.elapsed(), outcome.as_ref().err().map(|_| "kube"));
    outcome
}

async fn reconcile_inner(server: &McpServer, context: &Context) -> Result<Action, DiscoveryError> {
    context.changes.forget_gone();
    let announced = context.changes.take_pending(&ObjectRef::from_obj(server));
    let wait = next_listing(server, jiff::Timestamp::now());
    if !wait.is_zero() && !announced {
        return Ok(Action::requeue(wait));
    }
    let namespace = server.namespace().unwrap_or_default();
    // A server the operator runs: its Deployment and Service first.
    let judged = match super::mcp_deploy::reconcile(&context.client, server).await? {
        Err(why) => Err(("NameTaken", why)),
        Ok(()) => judge(server, &context.client, &namespace).await?,
    };
    let sent = judged.as_ref().ok().and_then(|r| r.as_ref().ok()).cloned();
    let status = listed(server, judged).await;
    let answered = status.conditions.iter().any(|c| c.type_ == READY && c.status == "True");
    if let (Some(sent), true) = (sent, answered) {
        context.changes.follow(server, sent.headers, sent.ca_bundle.as_deref()).await;
    }
    if server.status.as_ref() != Some(&status) {
        let patch = json!({"apiVersion": McpServer::api_version(&()), "kind": "McpServer", "metadata": {"name": server.name_any()}, "status": status});
        let api: Api<McpServer> = Api::namespaced(context.client.clone(), &namespace);
        api.patch_status(&server.name_any(), &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch)).await?;
    }
    let mut listed_server = server.clone();
    listed_server.status = Some(status);
    Ok(Action::requeue(listing_interval(&listed_server)))
}

/// What the discovery sends: the headers' values and the CA bundle.
#[derive(Clone, Debug, Default)]
pub struct Prepared {
    /// The headers, by name.
    pub headers: Headers,
    /// The PEM bundle of `caBundleRef`.
    pub ca_bundle: Option<String>,
}

/// What judging a server's spec came to: what to send when its spec is valid and its Secrets and
/// ConfigMap exist (or why the discovery is not asked), else the reason and message of its refusal.
pub type Judged = Result<Result<Prepared, Outcome>, (&'static str, String)>;

/// Judges `server`, reading its Secrets and its CA bundle's ConfigMap in `namespace`.
async fn judge(server: &McpServer, client: &kube::Client, namespace: &str) -> Result<Judged, kube::Error> {
    let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let mut values = HashMap::new();
    for key in server.spec.headers.iter().filter_map(|h| h.secret_key_ref.as_ref()) {
        let read = secrets.get_opt(&key.name).await?.and_then(|s| s.data?.get(&key.key).map(|v| v.0.clone()));
        if let Some(value) = read.and_then(|bytes| String::from_utf8(bytes).ok()) {
            values.insert((key.name.clone(), key.key.clone()), value);
        }
    }
    let bundle = match &server.spec.ca_bundle_ref {
        Some(key) => {
            let maps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
            maps.get_opt(&key.name).await?.and_then(|m| m.data?.get(&key.key).cloned())
        }
        None => None,
    };
    Ok(judge_with(server, |name, key| values.get(&(name.to_string(), key.to_string())).cloned(), |_, _| bundle.clone()))
}

/// Judges `server` with `secret(name, key)` reading its Secrets' values and `config_map(name, key)` its
/// CA bundle: refused when its spec breaks a rule or a Secret or ConfigMap key is missing (naming the
/// field, never a value); not asked when a header is a user's token (`caller`) or a runner's variable
/// this process does not have.
pub fn judge_with(
    server: &McpServer,
    secret: impl Fn(&str, &str) -> Option<String>,
    config_map: impl Fn(&str, &str) -> Option<String>,
) -> Judged {
    let report = validate_mcp_server(server);
    if !report.is_ok() {
        return Err(("InvalidSpec", report.error_summary()));
    }
    let ca_bundle = match &server.spec.ca_bundle_ref {
        Some(key) => match config_map(&key.name, &key.key) {
            Some(bundle) => Some(bundle),
            None => {
                let why = format!("spec.caBundleRef: ConfigMap {:?} has no key {:?}", key.name, key.key);
                return Err(("ReferenceNotFound", why));
            }
        },
        None => None,
    };
    let mut headers = Headers::new();
    for (i, header) in server.spec.headers.iter().enumerate() {
        let field = format!("spec.headers[{i}]");
        let value = if let Some(value) = &header.value {
            value.clone()
        } else if let Some(key) = &header.secret_key_ref {
            match secret(&key.name, &key.key) {
                Some(value) => value,
                None => {
                    let why = format!("{field}.secretKeyRef: Secret {:?} has no key {:?}", key.name, key.key);
                    return Err(("ReferenceNotFound", why));
                }
            }
        } else if header.caller.is_some() {
            let why = format!("{field}.caller: a run's user's token is sent, which discovery does not have");
            return Ok(Err(Outcome::NotAsked("PerUserCredentials", why)));
        } else if let Some(env) = &header.env {
            match std::env::var(env) {
                Ok(value) => value,
                Err(_) => {
                    let why = format!("{field}.env: the variable {env} is the runners'; discovery does not have it");
                    return Ok(Err(Outcome::NotAsked("RunnerCredentials", why)));
                }
            }
        } else {
            return Err(("InvalidSpec", format!("{field}: has no value")));
        };
        let value = format!("{}{value}", header.prefix.as_deref().unwrap_or_default());
        let (Ok(name), Ok(value)) = (HeaderName::from_bytes(header.name.as_bytes()), HeaderValue::from_str(&value))
        else {
            return Err(("InvalidSpec", format!("{field}: not a valid header")));
        };
        headers.insert(name, value);
    }
    Ok(Ok(Prepared { headers, ca_bundle }))
}

/// The status of `server` after judging it and, when it may be asked, listing its tools.
pub async fn listed(server: &McpServer, judged: Judged) -> McpServerStatus {
    let (accepted, outcome) = match judged {
        Err(refused) => (Err(refused), None),
        Ok(Err(not_asked)) => (Ok(()), Some(not_asked)),
        Ok(Ok(sent)) => {
            let (url, timeout) = (server.endpoint(), server.spec.timeout());
            let outcome = match discover(&url, sent.headers, sent.ca_bundle.as_deref(), timeout).await {
                Ok(found) => Outcome::Listed(found),
                Err(why) => Outcome::Failed("Unreachable", why),
            };
            (Ok(()), Some(outcome))
        }
    };
    status_after(server, accepted, outcome.as_ref(), jiff::Timestamp::now())
}

fn error_policy(server: Arc<McpServer>, error: &DiscoveryError, context: Arc<Context>) -> Action {
    context.metrics.failed(KIND, "kube");
    tracing::warn!(server = %server.name_any(), error = %error, "cannot reconcile an McpServer; retrying");
    Action::requeue(RETRY)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::mcp_server::{DiscoveredTool, McpServerSpec};

    fn server() -> McpServer {
        let mut server = McpServer::new(
            "docs",
            McpServerSpec { url: "http://docs/mcp".into(), refresh_seconds: Some(60), ..Default::default() },
        );
        server.metadata.generation = Some(2);
        server
    }

    #[test]
    fn a_listing_writes_the_tools_and_ready_and_a_failure_keeps_the_tools_with_the_error() {
        let now = jiff::Timestamp::from_second(1_800_000_000).expect("a time");
        let found = Discovery {
            tools: vec![DiscoveredTool { name: "search".into(), destructive: Some(false), ..Default::default() }],
            count: 1,
            protocol_version: "2025-06-18".into(),
            server_name: "docs".into(),
        };
        let mut server = server();
        let listed = status_after(&server, Ok(()), Some(&Outcome::Listed(found)), now);
        assert_eq!((listed.tool_count, listed.tools[0].name.as_str()), (Some(1), "search"));
        let ready = listed.conditions.iter().find(|c| c.type_ == READY).expect("Ready");
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("True", "Listed"));
        server.status = Some(listed);
        let failed = status_after(&server, Ok(()), Some(&Outcome::Failed("Unreachable", "refused".into())), now);
        assert_eq!(failed.tools.len(), 1, "the last tools stay while the server is away");
        assert_eq!(failed.last_error.as_deref(), Some("refused"));
        let refused = status_after(&server, Err(("InvalidSpec", "spec.url: bad".into())), None, now);
        let ready = refused.conditions.iter().find(|c| c.type_ == READY).expect("Ready");
        assert_eq!(ready.status, "Unknown");
    }

    #[test]
    fn a_server_is_listed_again_when_its_spec_changes_or_its_interval_passes() {
        let now = jiff::Timestamp::from_second(1_800_000_000).expect("a time");
        let mut server = server();
        assert_eq!(next_listing(&server, now), Duration::ZERO, "never listed");
        server.status = Some(McpServerStatus {
            observed_generation: Some(2),
            last_check_time: Some(Time(now)),
            ..Default::default()
        });
        assert_eq!(next_listing(&server, now), Duration::from_secs(60));
        server.metadata.generation = Some(3);
        assert_eq!(next_listing(&server, now), Duration::ZERO, "the spec changed");
    }
}
