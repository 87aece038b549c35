//! A run of a remote subagent (`spec.remote.a2a`): the run's input is sent to the remote A2A agent as a
//! message in the run's thread (the A2A context), and the remote task is the run. Its updates become
//! the run's events (text as message deltas, data and artifacts as custom events), its artifacts' text
//! (else its last message) the run's answer, its failure the run's failure; a cancel of the run (its
//! own, or its parent's) cancels the remote task; past `timeoutSeconds` the remote task is cancelled
//! and the run fails. A remote task that asks for input ends the run `completed` with the question
//! and the reason `InputRequired`: the parent answers it by delegating again in the same child thread,
//! which sends the answer to that task. The parent's `traceparent` goes with every request, and the
//! parent's run and thread in the message's metadata (`yuxi.dev/parent`).

pub mod client;

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use self::client::{Remote, RemoteError};
use super::graph::{RunIdentity, RunReport, record_end};
use crate::delegation::a2a::map::run_status;
use crate::delegation::a2a::rpc::method;
use crate::delegation::a2a::wire::{Artifact, Message, StreamResponse, Task, TaskState};
use crate::resources::remote::{DEFAULT_CARD_TTL_SECONDS, DEFAULT_REMOTE_TIMEOUT_SECONDS, RemoteA2a, header_env_name};
use crate::resources::{AgentRun, TokenUsage};
use crate::run::message::Message as ThreadMessage;
use crate::run::{EventKind, RunStatus};
use crate::store::RunnerStoreClient;

/// The reason a run ends with when its remote task waits for input.
pub const INPUT_REQUIRED: &str = "InputRequired";
/// How often a remote task that does not stream is read while it goes on.
const POLL: Duration = Duration::from_millis(500);
/// The most characters of one update kept in the run's events.
const MAX_UPDATE_CHARS: usize = 8 * 1024;

/// What a run of a remote agent needs.
pub struct RemoteRun<'a> {
    /// The run's state store.
    pub store: RunnerStoreClient,
    /// The run.
    pub identity: RunIdentity,
    /// The AgentRun.
    pub run: &'a AgentRun,
    /// The remote agent.
    pub a2a: &'a RemoteA2a,
    /// How often a cancel is looked for.
    pub cancel_poll: Duration,
    /// How long the run's end is retried while the store fails.
    pub end_retry_for: Duration,
}

/// The headers `a2a` names, their values read: `value`, `env`, or for `secretKeyRef` the runner's
/// variable the controller set from the Secret. Errors name the header's field.
pub fn headers(a2a: &RemoteA2a) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (i, header) in a2a.headers.iter().enumerate() {
        let field = format!("spec.remote.a2a.headers[{i}]");
        let value = match (&header.value, &header.env, &header.secret_key_ref) {
            (Some(value), _, _) => value.clone(),
            (None, Some(env), _) => std::env::var(env).map_err(|_| format!("{field}.env: the variable {env} is not set"))?,
            (None, None, Some(_)) => std::env::var(header_env_name(i)).map_err(|_| {
                format!("{field}.secretKeyRef: the Secret's value is not in the runner's environment (a cluster gives it to the runner; locally, use env)")
            })?,
            (None, None, None) => return Err(format!("{field}: has no value")),
        };
        let value = format!("{}{value}", header.prefix.as_deref().unwrap_or_default());
        let name = HeaderName::from_bytes(header.name.as_bytes()).map_err(|e| format!("{field}.name: {e}"))?;
        let mut value =
            HeaderValue::from_str(&value).map_err(|_| format!("{field}: the value is not a valid header value"))?;
        value.set_sensitive(true);
        map.insert(name, value);
    }
    Ok(map)
}

/// What the remote task has said so far.
#[derive(Default)]
struct Seen {
    task_id: Option<String>,
    state: Option<TaskState>,
    last_text: Option<String>,
    artifacts: Vec<Artifact>,
    usage: Option<TokenUsage>,
}

impl RemoteRun<'_> {
    /// Runs it to its end and records the end: the report.
    pub async fn run(&self, metadata: Value) -> RunReport {
        let input = self.run.spec.input.clone();
        let (run_id, thread_id) = (&self.identity.run_id, &self.identity.thread_id);
        let started = async {
            self.store.append_event(run_id, thread_id, EventKind::Metadata, metadata).await?;
            self.store.put_run_input(run_id, thread_id, &input).await
        };
        let report = match started.await {
            Err(err) => report(RunStatus::Failed, String::new(), Some(format!("the run's store failed: {err}")), None),
            Ok(stored) => {
                let report = self.delegate(&input).await;
                let mut added = Vec::new();
                if !stored {
                    added.push(ThreadMessage::User { content: input.clone() });
                }
                if !report.output.is_empty() {
                    added.push(ThreadMessage::Assistant {
                        content: Some(report.output.clone()),
                        tool_calls: Vec::new(),
                    });
                }
                record_end(&self.store, &self.identity, &added, &report.result(&self.identity), self.end_retry_for)
                    .await;
                return report;
            }
        };
        record_end(&self.store, &self.identity, &[], &report.result(&self.identity), self.end_retry_for).await;
        report
    }

    /// Sends the input and follows the remote task to its end, a cancel, or the time limit.
    async fn delegate(&self, input: &str) -> RunReport {
        let remote = match headers(self.a2a) {
            Err(why) => return report(RunStatus::Failed, String::new(), Some(why), None),
            Ok(headers) => {
                let ttl = Duration::from_secs(self.a2a.card_ttl_seconds.unwrap_or(DEFAULT_CARD_TTL_SECONDS).into());
                match client::card(&self.a2a.card_url, headers, ttl).await {
                    Ok(remote) => remote,
                    Err(err) => return report(RunStatus::Failed, String::new(), Some(err.to_string()), None),
                }
            }
        };
        let traceparent = crate::telemetry::current_traceparent();
        let limit = Duration::from_secs(self.a2a.timeout_seconds.unwrap_or(DEFAULT_REMOTE_TIMEOUT_SECONDS).into());
        let mut seen = Seen::default();
        let outcome = tokio::select! {
            outcome = self.follow(&remote, input, traceparent.as_deref(), &mut seen) => Some(outcome),
            () = self.store.cancelled(&self.identity.run_id, self.cancel_poll) => None,
            () = tokio::time::sleep(limit) => Some(Err(RemoteError::Unreachable(format!("the remote task took longer than {} s", limit.as_secs())))),
        };
        let cancel_remote = |seen: &Seen| {
            let (remote, task, traceparent) = (remote.clone(), seen.task_id.clone(), traceparent.clone());
            async move {
                if let Some(task) = task
                    && let Err(err) =
                        remote.call(method::CANCEL_TASK, json!({"id": task}), traceparent.as_deref()).await
                {
                    tracing::warn!(error = %err, "the remote task could not be cancelled");
                }
            }
        };
        match outcome {
            None => {
                cancel_remote(&seen).await;
                report(RunStatus::Cancelled, String::new(), None, seen.usage)
            }
            Some(Err(err)) => {
                cancel_remote(&seen).await;
                report(RunStatus::Failed, String::new(), Some(err.to_string()), seen.usage)
            }
            Some(Ok(())) => ended(seen),
        }
    }

    /// Sends the message (to the task that waits for input in this thread, if one does) and reads the
    /// task's updates until it ends or asks for input.
    async fn follow(
        &self,
        remote: &Remote,
        input: &str,
        traceparent: Option<&str>,
        seen: &mut Seen,
    ) -> Result<(), RemoteError> {
        let thread = &self.identity.thread_id;
        let waiting = self.waiting_task(remote, traceparent).await;
        let parent = self.run.spec.parent.as_ref().map(|p| json!({"run_id": p.run_id, "thread_id": p.thread_id}));
        let message = json!({
            "messageId": uuid::Uuid::new_v4().to_string(),
            "contextId": thread,
            "taskId": waiting,
            "role": "ROLE_USER",
            "parts": [{"text": input}],
            "metadata": {"yuxi.dev/parent": parent, "yuxi.dev/run": self.identity.run_id},
        });
        let params = json!({"message": message});
        if remote.streaming {
            let mut items = remote.stream(method::SEND_STREAMING_MESSAGE, params, traceparent).await?;
            while let Some(item) = items.next().await? {
                self.take(item, seen).await;
                if seen.state.is_some_and(|s| s.is_terminal() || s.is_interrupted()) {
                    break;
                }
            }
        } else {
            let answer = remote.call(method::SEND_MESSAGE, params, traceparent).await?;
            self.take(answer, seen).await;
        }
        // A stream that ended early, or a task answered before its end, is read until it ends.
        while !seen.state.is_some_and(|s| s.is_terminal() || s.is_interrupted()) {
            let Some(task) = seen.task_id.clone() else {
                return Err(RemoteError::Invalid("the remote agent answered no task".into()));
            };
            tokio::time::sleep(POLL).await;
            let answer = remote.call(method::GET_TASK, json!({"id": task}), traceparent).await?;
            self.take(json!({"task": answer}), seen).await;
        }
        Ok(())
    }

    /// The remote task of this thread that waits for input, when the thread has gone on before.
    async fn waiting_task(&self, remote: &Remote, traceparent: Option<&str>) -> Option<String> {
        let earlier = self.store.thread_messages(&self.identity.thread_id).await.ok()?;
        if earlier.len() <= 1 {
            return None;
        }
        let params =
            json!({"contextId": self.identity.thread_id, "status": "TASK_STATE_INPUT_REQUIRED", "pageSize": 1});
        let listed = remote.call(method::LIST_TASKS, params, traceparent).await.ok()?;
        listed["tasks"][0]["id"].as_str().map(str::to_string)
    }

    /// Takes one answer or stream item: notes the task's id, state, text, artifacts and usage, and
    /// writes what it says as the run's events.
    async fn take(&self, item: Value, seen: &mut Seen) {
        let Ok(item) = serde_json::from_value::<StreamResponse>(item.clone()) else {
            tracing::warn!("the remote agent sent an item that is not A2A: {}", cut(&item.to_string()));
            return;
        };
        let (status, artifact) = match item {
            StreamResponse::Task(task) => {
                seen.task_id = Some(task.id.clone());
                note_usage(&task, seen);
                if !task.artifacts.is_empty() {
                    seen.artifacts = task.artifacts.clone();
                }
                (Some(task.status), None)
            }
            StreamResponse::Message(message) => {
                seen.state = Some(TaskState::Completed);
                seen.last_text = Some(message.text());
                self.say(&message).await;
                (None, None)
            }
            StreamResponse::StatusUpdate(update) => {
                seen.task_id.get_or_insert(update.task_id.clone());
                (Some(update.status), None)
            }
            StreamResponse::ArtifactUpdate(update) => {
                seen.task_id.get_or_insert(update.task_id.clone());
                (None, Some((update.artifact, update.append)))
            }
        };
        if let Some(status) = status {
            seen.state = Some(status.state);
            if let Some(message) = &status.message {
                let text = message.text();
                if !text.is_empty() {
                    seen.last_text = Some(text);
                }
                self.say(message).await;
            }
        }
        if let Some((artifact, append)) = artifact {
            let payload = json!({"type": "a2a_artifact", "artifact_id": artifact.artifact_id, "name": artifact.name, "text": cut(&text_of(&artifact.parts))});
            self.emit(EventKind::Custom, payload).await;
            match seen.artifacts.iter_mut().find(|a| a.artifact_id == artifact.artifact_id) {
                Some(kept) if append => kept.parts.extend(artifact.parts),
                Some(kept) => *kept = artifact,
                None => seen.artifacts.push(artifact),
            }
        }
    }

    /// Writes an agent's message as the run's events: its text as a message delta, its data as custom
    /// events.
    async fn say(&self, message: &Message) {
        let text = message.text();
        if !text.is_empty() {
            let payload = json!({"type": "message_delta", "message_id": message.message_id, "content": cut(&text)});
            self.emit(EventKind::Messages, payload).await;
        }
        for data in message.parts.iter().filter_map(|p| p.data.as_ref()) {
            self.emit(EventKind::Custom, json!({"type": "a2a_data", "data": cut(&data.to_string())})).await;
        }
    }

    async fn emit(&self, kind: EventKind, payload: Value) {
        let (run_id, thread_id) = (&self.identity.run_id, &self.identity.thread_id);
        if let Err(err) = self.store.append_event(run_id, thread_id, kind, payload).await {
            tracing::warn!(run_id = %run_id, error = %err, "cannot write the remote task's update");
        }
    }
}

/// The tokens a task's metadata reports (`yuxi.dev/run.token_usage`, as this system's tasks say them).
fn note_usage(task: &Task, seen: &mut Seen) {
    let usage = task.metadata.as_ref().and_then(|m| m.get("yuxi.dev/run")).and_then(|r| r.get("token_usage"));
    if let Some(usage) = usage.and_then(|u| serde_json::from_value::<TokenUsage>(u.clone()).ok()) {
        seen.usage = Some(usage);
    }
}

/// The text parts of `parts`, joined.
fn text_of(parts: &[crate::delegation::a2a::wire::Part]) -> String {
    parts.iter().filter_map(|p| p.text.as_deref()).collect::<Vec<_>>().join("")
}

/// `text` cut to [`MAX_UPDATE_CHARS`] characters.
fn cut(text: &str) -> String {
    text.chars().take(MAX_UPDATE_CHARS).collect()
}

/// The run's report once the remote task ended or asks for input.
fn ended(seen: Seen) -> RunReport {
    let state = seen.state.unwrap_or(TaskState::Unspecified);
    let said = seen.last_text.clone().unwrap_or_default();
    if state.is_interrupted() {
        let output = format!(
            "The remote agent needs more to go on: {said}\n(Its task waits in this subagent's thread: delegate again with this thread_id to answer it.)"
        );
        let mut report = report(RunStatus::Completed, output, None, seen.usage);
        report.reason = Some(INPUT_REQUIRED.into());
        return report;
    }
    match run_status(state) {
        Some(RunStatus::Completed) => {
            let answer: Vec<String> =
                seen.artifacts.iter().map(|a| text_of(&a.parts)).filter(|t| !t.is_empty()).collect();
            let output = if answer.is_empty() { said } else { answer.join("\n\n") };
            report(RunStatus::Completed, output, None, seen.usage)
        }
        Some(RunStatus::Cancelled) => report(
            RunStatus::Failed,
            String::new(),
            Some(format!("the remote agent canceled its task: {said}")),
            seen.usage,
        ),
        _ => {
            let why = if said.is_empty() {
                format!("the remote task ended {state:?}")
            } else {
                format!("the remote task failed: {said}")
            };
            report(RunStatus::Failed, String::new(), Some(why), seen.usage)
        }
    }
}

fn report(status: RunStatus, output: String, error: Option<String>, usage: Option<TokenUsage>) -> RunReport {
    RunReport {
        status,
        output,
        error,
        token_usage: usage.unwrap_or_default(),
        reason: None,
        tree_token_usage: None,
        tree_cost: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delegation::a2a::wire::Part;
    use crate::resources::remote::RemoteHeader;

    #[test]
    fn headers_are_read_from_their_source_and_a_missing_one_names_its_field() {
        let header = |name: &str, value: Option<&str>, env: Option<&str>| RemoteHeader {
            name: name.into(),
            value: value.map(str::to_string),
            env: env.map(str::to_string),
            prefix: Some("Bearer ".into()),
            ..Default::default()
        };
        let a2a = RemoteA2a { headers: vec![header("X-Plain", Some("v"), None)], ..Default::default() };
        assert_eq!(headers(&a2a).expect("read")["x-plain"], "Bearer v");
        let missing = RemoteA2a {
            headers: vec![header("Authorization", None, Some("YUXI_TEST_UNSET_VARIABLE"))],
            ..Default::default()
        };
        let why = headers(&missing).expect_err("unset");
        assert!(why.starts_with("spec.remote.a2a.headers[0].env"), "{why}");
        let secret = RemoteA2a {
            headers: vec![RemoteHeader {
                name: "Authorization".into(),
                secret_key_ref: Some(Default::default()),
                ..Default::default()
            }],
            ..Default::default()
        };
        assert!(headers(&secret).expect_err("not given").contains("secretKeyRef"));
    }

    fn artifact(text: &str) -> Artifact {
        Artifact {
            artifact_id: "a".into(),
            name: None,
            description: None,
            parts: vec![Part::text(text)],
            metadata: None,
        }
    }

    #[test]
    fn a_remote_tasks_end_is_the_runs_answer_failure_or_question() {
        let done = ended(Seen {
            state: Some(TaskState::Completed),
            artifacts: vec![artifact("the answer")],
            last_text: Some("working".into()),
            ..Default::default()
        });
        assert_eq!((done.status, done.output.as_str()), (RunStatus::Completed, "the answer"));
        let said = ended(Seen {
            state: Some(TaskState::Completed),
            last_text: Some("only said".into()),
            ..Default::default()
        });
        assert_eq!(said.output, "only said");
        let asked = ended(Seen {
            state: Some(TaskState::InputRequired),
            last_text: Some("Which year?".into()),
            ..Default::default()
        });
        assert_eq!((asked.status, asked.reason.as_deref()), (RunStatus::Completed, Some(INPUT_REQUIRED)));
        assert!(asked.output.contains("Which year?"));
        let failed =
            ended(Seen { state: Some(TaskState::Rejected), last_text: Some("no".into()), ..Default::default() });
        assert_eq!((failed.status, failed.error.as_deref()), (RunStatus::Failed, Some("the remote task failed: no")));
        let cancelled = ended(Seen { state: Some(TaskState::Canceled), ..Default::default() });
        assert_eq!(cancelled.status, RunStatus::Failed, "a cancel the run did not ask for is a failure");
    }
}
