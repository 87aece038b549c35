//! The task middleware's tools: a main agent's run delegates to subagents through the facade
//! (SEED-subagents.md "运行时调用链"). At start the runner asks the facade which subagents the run's user
//! may delegate to (`GET /api/tools?agent=<slug>`); when there are some, their list goes into the system
//! prompt and the six tools are offered. Each call goes to `POST /api/tools/<name>` with the run's own
//! credentials: the facade takes the parent (run, thread, file thread, user) from them, so a run can only
//! act as itself. The body carries the model's arguments and the call's id (`parent.tool_call_id`), so a
//! retried call finds the run the first one started.
//!
//! `task` is `subagent_start` then `subagent_await` here, so the child run is named in the parent's
//! events (a `custom` event `subagent_run`) as soon as it exists, not only when it ends.

use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolSpec};
use crate::delegation::wire::{Parent, RunBody, Snapshot, StartAnswer, ToolsAnswer};
use crate::delegation::{MAX_AWAIT_SECONDS, TaskOutcome, names, task_content};
use crate::run::RunStatus;

/// How long a call to the facade may take beyond the wait it asks for.
const CALL_MARGIN: Duration = Duration::from_secs(30);

/// The subagent tools cannot be mounted.
#[derive(Debug, thiserror::Error)]
pub enum MountError {
    /// The HTTP client cannot be built (the platform's roots cannot be read, or its TLS backend cannot
    /// start).
    #[error("cannot build the HTTP client for {base}: {message}")]
    HttpClient {
        /// The facade's URL.
        base: String,
        /// Why.
        message: String,
    },
    /// The facade cannot be reached, or did not answer in time.
    #[error("cannot reach the facade at {base} for the subagent tools: {source}")]
    Unreachable {
        /// The facade's URL.
        base: String,
        /// Why.
        source: reqwest::Error,
    },
    /// The facade's answer is not JSON.
    #[error("the facade's tool list is not JSON: {source}")]
    NotJson {
        /// The agent whose tools were asked for.
        agent: String,
        /// Why.
        source: reqwest::Error,
    },
    /// The facade answered an error.
    #[error("the facade refused the subagent tools ({status}): {message}")]
    Refused {
        /// The agent whose tools were asked for.
        agent: String,
        /// The HTTP status.
        status: reqwest::StatusCode,
        /// The facade's message, with the field it names.
        message: String,
    },
    /// The facade's answer is JSON but not a tool list.
    #[error("the facade's tool list is not one: {source}")]
    NotToolList {
        /// The agent whose tools were asked for.
        agent: String,
        /// Why.
        source: serde_json::Error,
    },
}

/// The facade, as the run's credentials reach it.
pub struct Facade {
    http: reqwest::Client,
    base: String,
    token: String,
    /// The runs this run started with `subagent_start` (or left running after a `task` that timed out)
    /// whose end its model has not read yet: `(run_id, subagent_slug)`.
    unreported: std::sync::Mutex<Vec<(String, String)>>,
}

impl Facade {
    /// The facade at `base` (such as `http://yuxi-api.yuxi.svc:8080`), called with the run's `token`.
    /// Errors: [`MountError::HttpClient`], the HTTP client cannot be built.
    pub fn new(base: &str, token: &str) -> Result<Self, MountError> {
        // The TLS configuration is made once for the process (reading the system's roots is what building
        // a client costs); each run's client has its own connections.
        let tls = crate::tls::platform_client_config()
            .map_err(|message| MountError::HttpClient { base: base.to_string(), message })?;
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .tls_backend_preconfigured(tls)
            .build()
            .map_err(|e| MountError::HttpClient { base: base.to_string(), message: e.to_string() })?;
        Ok(Self {
            http,
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
            unreported: Default::default(),
        })
    }

    /// Remembers a child run whose end the model should be told of.
    fn watch_child(&self, run_id: &str, slug: &str) {
        let mut unreported = self.unreported.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !unreported.iter().any(|(id, _)| id == run_id) {
            unreported.push((run_id.to_string(), slug.to_string()));
        }
    }

    /// Forgets a child run whose end the model has read in a tool's answer.
    fn reported(&self, run_id: &str) {
        self.unreported.lock().unwrap_or_else(std::sync::PoisonError::into_inner).retain(|(id, _)| id != run_id);
    }

    /// The children that have ended since the model last heard of them, each as the notice it reads
    /// before its next turn (with the run, its subagent and its status), and forgotten then. One
    /// `subagent_wait_any` that does not wait, per 50 children; none when no child is unreported. A
    /// facade that cannot answer leaves them for the next turn.
    pub async fn ended_children(&self) -> Vec<crate::delegation::wire::RunEnded> {
        let pending: Vec<String> = {
            let unreported = self.unreported.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            unreported.iter().map(|(id, _)| id.clone()).collect()
        };
        let mut ended = Vec::new();
        for chunk in pending.chunks(crate::delegation::MAX_WAIT_ANY_RUNS) {
            let body = json!({"parent": {}, "run_ids": chunk, "timeout_seconds": 0});
            match self.post(names::SUBAGENT_WAIT_ANY, &body, None).await {
                Ok(answer) => match serde_json::from_value::<crate::delegation::wire::WaitAnyAnswer>(answer) {
                    Ok(answer) => ended.extend(answer.ended),
                    Err(err) => tracing::warn!(error = %err, "the facade's wait_any answer is not one"),
                },
                Err(err) => tracing::warn!(error = %err, "cannot learn whether the run's children have ended"),
            }
        }
        for run in &ended {
            self.reported(&run.run_id);
        }
        ended
    }

    /// The subagent tools and the prompt section for `agent`, or `None` when it may delegate to no
    /// subagent.
    ///
    /// Errors: the facade cannot be reached ([`MountError::Unreachable`]), refuses
    /// ([`MountError::Refused`]), or answers something else than a tool list ([`MountError::NotJson`],
    /// [`MountError::NotToolList`]). The run then fails: a main agent without its subagents would answer
    /// differently from what its author meant.
    pub async fn mount(self: &Arc<Self>, agent: &str) -> Result<Option<(Vec<Arc<dyn Tool>>, String)>, MountError> {
        let body = self.get("", agent).await?;
        let body: ToolsAnswer = serde_json::from_value(body)
            .map_err(|source| MountError::NotToolList { agent: agent.to_string(), source })?;
        let Some(prompt) = body.prompt else { return Ok(None) };
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for schema in &body.tools {
            let spec = ToolSpec {
                name: schema["name"].as_str().unwrap_or_default().to_string(),
                description: schema["description"].as_str().unwrap_or_default().to_string(),
                parameters: schema["parameters"].clone(),
            };
            if !spec.name.is_empty() {
                tools.push(Arc::new(DelegationTool { spec, facade: self.clone() }));
            }
        }
        Ok(Some((tools, prompt)))
    }

    /// `GET /api/tools<path>` (`path` empty or `/<name>`) for the run's agent: the answer's JSON, or why
    /// not.
    pub(super) async fn get(&self, path: &str, agent: &str) -> Result<Value, MountError> {
        let response = with_trace(self.http.get(format!("{}/api/tools{path}", self.base)))
            .query(&[("agent", agent)])
            .bearer_auth(&self.token)
            .timeout(CALL_MARGIN)
            .send()
            .await
            .map_err(|source| MountError::Unreachable { base: self.base.clone(), source })?;
        let status = response.status();
        let body: Value =
            response.json().await.map_err(|source| MountError::NotJson { agent: agent.to_string(), source })?;
        if !status.is_success() {
            return Err(MountError::Refused { agent: agent.to_string(), status, message: message(&body) });
        }
        Ok(body)
    }

    /// A token of the run's user for `audience` (`POST /api/tools/caller_token`), for an MCP server's
    /// `caller` header. Errors: the facade's refusal or absence, in words.
    pub async fn caller_token(&self, audience: &str) -> Result<String, String> {
        let answer =
            self.post(names::CALLER_TOKEN, &json!({"audience": audience}), None).await.map_err(|e| e.to_string())?;
        answer["token"].as_str().map(str::to_string).ok_or_else(|| "the facade answered no token".to_string())
    }

    /// `POST /api/tools/<tool>` with `body`; the answer, or the facade's refusal as a tool error the
    /// model can read.
    pub(super) async fn post(&self, tool: &str, body: &Value, wait: Option<u64>) -> Result<Value, ToolError> {
        let timeout = CALL_MARGIN + Duration::from_secs(wait.unwrap_or(0));
        let response = with_trace(self.http.post(format!("{}/api/tools/{tool}", self.base)))
            .bearer_auth(&self.token)
            .json(body)
            .timeout(timeout)
            .send()
            .await
            .map_err(|e| ToolError::new(format!("{tool} could not reach the facade: {e}")))?;
        let status = response.status();
        let answer: Value =
            response.json().await.map_err(|e| ToolError::new(format!("{tool}: the answer is not JSON: {e}")))?;
        if status.is_success() { Ok(answer) } else { Err(ToolError::new(format!("{tool}: {}", message(&answer)))) }
    }
}

/// The `message` of a facade error body, with the field when it names one.
fn message(body: &Value) -> String {
    let text = body["message"].as_str().unwrap_or("no message").to_string();
    match body["field"].as_str() {
        Some(field) if !text.starts_with(field) => format!("{field}: {text}"),
        _ => text,
    }
}

/// One of the six subagent tools.
struct DelegationTool {
    spec: ToolSpec,
    facade: Arc<Facade>,
}

impl DelegationTool {
    /// The model's arguments with the call's id as `parent.tool_call_id`. The model cannot set `parent`.
    fn body(arguments: Value, tool_call_id: Option<&str>) -> Result<Value, ToolError> {
        let Value::Object(mut body) = arguments else {
            return Err(ToolError::new("the arguments must be a JSON object"));
        };
        if body.contains_key("parent") {
            return Err(ToolError::new("argument parent is not accepted: the run's identity is its own"));
        }
        body.insert("parent".into(), json!({"tool_call_id": tool_call_id}));
        Ok(Value::Object(body))
    }

    async fn run(&self, context: Option<ToolContext>, arguments: Value) -> Result<String, ToolError> {
        let name = self.spec.name.as_str();
        let wait = arguments.get("timeout_seconds").and_then(Value::as_u64).map(|t| t.min(MAX_AWAIT_SECONDS));
        let call_id = context.as_ref().map(|c| c.tool_call_id.clone());
        if name == names::TASK {
            return self.task(context, arguments, wait).await;
        }
        let wait = if name == names::SUBAGENT_AWAIT { Some(wait.unwrap_or(MAX_AWAIT_SECONDS)) } else { None };
        let answer = self.facade.post(name, &Self::body(arguments, call_id.as_deref())?, wait).await?;
        if let (Some(context), Some(run_id), Some(thread_id)) =
            (&context, answer["run_id"].as_str(), answer["thread_id"].as_str())
        {
            context.link_child(run_id, thread_id);
            if name == names::SUBAGENT_START {
                announce(context, run_id, thread_id, &answer["subagent_slug"], name).await;
            }
        }
        self.note_reports(name, &answer);
        Ok(answer.to_string())
    }

    /// Keeps the list of children to tell the model about: a run started in the background is added; a
    /// run the answer shows ended (its status, its await, a wait for any) is one the model has read.
    fn note_reports(&self, name: &str, answer: &Value) {
        let terminal = |status: &Value| {
            serde_json::from_value::<RunStatus>(status.clone()).is_ok_and(|status| status.is_terminal())
        };
        if name == names::SUBAGENT_START
            && answer["status"] != "busy"
            && let (Some(run_id), Some(slug)) = (answer["run_id"].as_str(), answer["subagent_slug"].as_str())
        {
            self.facade.watch_child(run_id, slug);
        }
        if let Some(run_id) = answer["run_id"].as_str()
            && terminal(&answer["status"])
            && name != names::SUBAGENT_START
        {
            self.facade.reported(run_id);
        }
        for ended in answer["ended"].as_array().into_iter().flatten() {
            if let Some(run_id) = ended["run_id"].as_str() {
                self.facade.reported(run_id);
            }
        }
    }

    /// `task`: start, name the child in the parent's events, then wait for it.
    async fn task(
        &self,
        context: Option<ToolContext>,
        arguments: Value,
        wait: Option<u64>,
    ) -> Result<String, ToolError> {
        let call_id = context.as_ref().map(|c| c.tool_call_id.clone());
        let mut start = Self::body(arguments, call_id.as_deref())?;
        if let Some(map) = start.as_object_mut() {
            map.remove("timeout_seconds");
        }
        let started = self.facade.post(names::SUBAGENT_START, &start, None).await?;
        let started: StartAnswer = decode(names::SUBAGENT_START, started)?;
        let run = match started {
            StartAnswer::Busy(busy) => {
                return Ok(format!(
                    "The subagent thread {} is busy with run {}; await it or start a new thread.",
                    busy.thread_id, busy.active_run_id
                ));
            }
            StartAnswer::Run(run) => run,
        };
        if let Some(context) = &context {
            context.link_child(&run.run_id, &run.thread_id);
            announce(context, &run.run_id, &run.thread_id, &Value::from(run.subagent_slug.as_str()), names::TASK).await;
        }
        let wait = wait.unwrap_or(MAX_AWAIT_SECONDS).max(1);
        let body = RunBody { parent: Parent::default(), run_id: run.run_id.clone(), timeout_seconds: Some(wait) };
        let body = serde_json::to_value(&body).map_err(|e| ToolError::new(format!("task: {e}")))?;
        let awaited = self.facade.post(names::SUBAGENT_AWAIT, &body, Some(wait)).await?;
        let awaited: Snapshot = decode(names::SUBAGENT_AWAIT, awaited)?;
        let outcome = if awaited.wait_timed_out == Some(true) {
            // Left running: the model is told when it ends.
            self.facade.watch_child(&run.run_id, &run.subagent_slug);
            TaskOutcome::StillRunning(&run.run_id)
        } else if awaited.status == RunStatus::Completed {
            TaskOutcome::Completed(awaited.result.as_ref().and_then(Value::as_str))
        } else {
            TaskOutcome::Ended(awaited.status, awaited.error.as_deref())
        };
        Ok(task_content(&run.thread_id, outcome))
    }
}

/// The facade's answer to `tool` as the type the contract gives it. Errors: an answer of another shape.
fn decode<T: serde::de::DeserializeOwned>(tool: &str, answer: Value) -> Result<T, ToolError> {
    serde_json::from_value(answer).map_err(|e| ToolError::new(format!("{tool}: the facade's answer is not one: {e}")))
}

/// Writes the parent's `custom` event naming a child run as soon as it exists.
async fn announce(context: &ToolContext, run_id: &str, thread_id: &str, slug: &Value, tool: &str) {
    context
        .note(json!({"type": "subagent_run", "tool_call_id": context.tool_call_id, "tool": tool,
                     "run_id": run_id, "thread_id": thread_id, "subagent_slug": slug}))
        .await;
}

impl Tool for DelegationTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    fn call(&self, arguments: Value) -> BoxFuture<'_, Result<String, ToolError>> {
        self.run(None, arguments).boxed()
    }

    fn call_in(&self, context: ToolContext, arguments: Value) -> BoxFuture<'_, Result<String, ToolError>> {
        self.run(Some(context), arguments).boxed()
    }
}

/// `request` with the current span's `traceparent` (a tool call's, or the run's), so that what the
/// facade does for it, a child run included, goes under it when traces are exported.
fn with_trace(request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    match crate::telemetry::current_traceparent() {
        Some(traceparent) => request.header("traceparent", traceparent),
        None => request,
    }
}
