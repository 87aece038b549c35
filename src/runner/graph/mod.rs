//! The graph: the model-and-tools loop that takes one run to a terminal state.
//!
//! Each step calls the model on the conversation so far; a turn with tool calls runs them and feeds the
//! results back; a turn without tool calls is the final answer. The loop stops on the final answer, on
//! `maxExecutionSteps`, on a cancel request (within the cancel poll interval, at the latest) or on the
//! deadline. A new run's question is in its thread from its start; whatever way the run stops, the
//! thread's other new messages and the result are persisted and exactly one `end` event is written.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::model::{Model, ModelTurn};
use super::tools::ToolBox;
use crate::resources::TokenUsage;
use crate::run::budget::{BUDGET_EXCEEDED, TreeUsage, UsageTarget};
use crate::run::message::{Message, ToolCall};
use crate::run::timeline::ModelCallEvent;
use crate::run::{EventKind, RunStatus};
use crate::store::{RunnerStoreClient, StoreError};

/// The most tool calls one model turn may make; the rest are answered with an error, so one turn cannot
/// flood the event stream.
pub const MAX_TOOL_CALLS_PER_TURN: usize = 64;

/// Everything the loop works with.
pub struct Graph {
    /// The run.
    pub identity: RunIdentity,
    /// Where events, history and the result go.
    pub store: RunnerStoreClient,
    /// The model.
    pub model: Model,
    /// The provider, as OpenTelemetry's `gen_ai.provider.name` spells it (`openai`, `anthropic`,
    /// `gcp.gemini`, `aws.bedrock`, `azure.ai.openai`, or the id's own prefix such as `scripted`).
    pub provider: String,
    /// The model's id as the run named it (a Model's name or `<provider>/<model>`), for the per-model
    /// totals.
    pub model_id: String,
    /// The Model's prices, when it states them: each call's usage is priced with them.
    pub pricing: Option<crate::resources::model::ModelPricing>,
    /// The granted tools.
    pub tools: ToolBox,
    /// The system prompt.
    pub system_prompt: String,
    /// The task.
    pub input: String,
    /// The most model calls.
    pub max_steps: u32,
    /// Retries of a model call that failed transiently.
    pub model_retries: u32,
    /// How long the run may take.
    pub timeout: Duration,
    /// How often the cancel key is checked besides the pub/sub notice.
    pub cancel_poll: Duration,
    /// How long the run's end, and an event write that never reached the store, are tried again while
    /// the store fails: the runner's lease, after which the sweeper ends the run.
    pub end_retry_for: Duration,
    /// The facade the run delegates through, when it may: before each model turn it says which of the
    /// runs it started in the background have ended, and the model is told.
    pub delegation: Option<std::sync::Arc<super::tools::subagents::Facade>>,
    /// Where the run's tokens are counted: its tree (with the tree's budget) and its namespace and user.
    pub usage: UsageTarget,
    /// Which calls wait for a person's approval ([`crate::run::approval`]).
    pub approval: crate::run::approval::ApprovalRule,
    /// The MCP server of each MCP tool, by tool name.
    pub tool_servers: std::collections::HashMap<String, String>,
    /// How long a paused run waits for decisions before it ends.
    pub approval_timeout: Duration,
    /// When the run wrote its first `messages` event, once it has (for the time to a first event).
    pub first_message: std::sync::Arc<std::sync::OnceLock<jiff::Timestamp>>,
}

mod approval;
mod batch;
mod report;
mod retry;
mod stream;
mod usage;

pub use report::{RunIdentity, RunReport, fail_before_start, record_end};

/// Why the loop stopped early.
enum Stop {
    Failed(String),
    Cancelled,
    /// The run's tree used its budget.
    Budget(TreeUsage),
    /// A call waits for a person: the turn's calls not yet run, and those among them that wait.
    Pause {
        remaining: Vec<ToolCall>,
        pending: Vec<crate::run::approval::ActionRequest>,
    },
}

impl From<StoreError> for Stop {
    fn from(err: StoreError) -> Self {
        Stop::Failed(format!("the run's state store failed: {err}"))
    }
}

/// The conversation as it grows during the run.
#[derive(Default)]
struct Conversation {
    messages: Vec<Message>,
    added: Vec<Message>,
    usage: TokenUsage,
    steps: u32,
}

impl Conversation {
    /// Adds `message` to what the model reads and to what the thread keeps.
    fn push(&mut self, message: Message) {
        self.messages.push(message.clone());
        self.added.push(message);
    }

    /// Adds `message` to what the model reads in this run only: the thread does not keep it, so nobody
    /// reading the conversation sees it as said (the notices the system gives the model).
    fn tell_model(&mut self, message: Message) {
        self.messages.push(message);
    }
}

impl Graph {
    /// Runs to a terminal state, with `metadata` written first (or, with `resumed`, goes on from a paused
    /// run's checkpoint with the person's decisions). Never panics on bad input; always persists what was
    /// said and writes one `end` event (a failure to write it is logged), unless the run pauses for a
    /// person: then it is `waiting`, its checkpoint saved, and the report says so.
    pub async fn run(&self, metadata: Value) -> RunReport {
        self.drive(metadata, None).await
    }

    /// Goes on with a paused run: the turn's calls decided as `decisions` say, then the loop, within what
    /// was left of the run's deadline.
    pub async fn resume(
        &self,
        checkpoint: crate::run::approval::Checkpoint,
        decisions: Vec<crate::run::approval::Decision>,
    ) -> RunReport {
        use crate::run::approval::DecisionKind;
        let count = |kind: DecisionKind| decisions.iter().filter(|d| d.decision == kind).count() as i64;
        tracing::event!(target: crate::telemetry::TARGET, tracing::Level::TRACE,
            yuxi.approval.approved = count(DecisionKind::Approve),
            yuxi.approval.edited = count(DecisionKind::Edit),
            yuxi.approval.rejected = count(DecisionKind::Reject),
            "approval_given"
        );
        let note = json!({"type": "resumed", "decisions": decisions.iter()
            .map(|d| json!({"tool_call_id": d.tool_call_id, "decision": d.decision})).collect::<Vec<_>>()});
        self.drive(note, Some((checkpoint, decisions))).await
    }

    async fn drive(
        &self,
        first: Value,
        resumed: Option<(crate::run::approval::Checkpoint, Vec<crate::run::approval::Decision>)>,
    ) -> RunReport {
        let mut conversation = Conversation::default();
        let (run_id, thread_id) = (&self.identity.run_id, &self.identity.thread_id);
        let timeout = resumed.as_ref().map_or(self.timeout, |(c, _)| Duration::from_secs(c.remaining_seconds.max(1)));
        let started = Instant::now();
        // A new run's question is in its thread from its start (the facade stores it as it starts the
        // run; this stores it for a run started otherwise), written once, after `metadata`.
        let mut input_stored = false;
        let first = match resumed {
            None => match self.emit(EventKind::Metadata, first).await {
                Ok(()) => self.riding_through(|| self.store.put_run_input(run_id, thread_id, &self.input)).await,
                Err(err) => Err(err),
            }
            .map(|stored| input_stored = stored),
            Some(_) => self.emit(EventKind::Custom, first).await,
        };
        let outcome = match first {
            Err(err) => Err(Stop::from(err)),
            Ok(()) => {
                let deadline = tokio::time::sleep(timeout);
                tokio::select! {
                    result = self.steps(&mut conversation, resumed, input_stored) => result,
                    () = self.store.cancelled(&self.identity.run_id, self.cancel_poll) => Ok(None),
                    () = deadline => Err(Stop::Failed(format!("the run exceeded its deadline of {} s", self.timeout.as_secs()))),
                }
            }
        };
        let outcome = match outcome {
            Err(Stop::Pause { remaining, pending }) => {
                let left = timeout.saturating_sub(started.elapsed());
                match self.pause(&conversation, remaining, pending, left).await {
                    Ok(report) => return report,
                    // Not running any more (cancelled meanwhile), or the store failed: it ends so.
                    Err(stop) => Err(stop),
                }
            }
            other => other,
        };
        // A run stopped from outside (its parent ended, or it was cancelled) whose tree has used its
        // budget stopped for the budget.
        let outcome = match outcome {
            Ok(None) | Err(Stop::Cancelled) => match self.budget_used().await {
                Some(tree) => Err(Stop::Budget(tree)),
                None => Err(Stop::Cancelled),
            },
            other => other,
        };
        let usage = conversation.usage.clone();
        let ended = |status, error: Option<String>, reason: Option<&str>| RunReport {
            status,
            output: String::new(),
            error,
            token_usage: usage.clone(),
            reason: reason.map(String::from),
            tree_token_usage: None,
            tree_cost: Vec::new(),
        };
        let mut report = match outcome {
            Ok(Some(output)) => RunReport { output, ..ended(RunStatus::Completed, None, None) },
            Ok(None) | Err(Stop::Cancelled) => ended(RunStatus::Cancelled, None, None),
            Err(Stop::Failed(error)) => ended(RunStatus::Failed, Some(error), None),
            Err(Stop::Budget(tree)) => {
                tracing::event!(target: crate::telemetry::TARGET, tracing::Level::TRACE, yuxi.tree.total_tokens = tree.usage.total_tokens, "budget_exceeded");
                ended(RunStatus::Failed, Some(tree.message()), Some(BUDGET_EXCEEDED))
            }
            Err(Stop::Pause { .. }) => unreachable!("a pause is handled above"),
        };
        // The root of a tree reports what the whole tree used.
        if self.usage.root_run_id == self.identity.run_id {
            let root = &self.usage.root_run_id;
            match self.riding_through(|| self.store.tree_usage(root)).await {
                Ok(tree) => {
                    report.tree_cost = tree.cost_amounts();
                    report.tree_token_usage = Some(tree.usage);
                }
                Err(err) => tracing::warn!(run_id = %root, error = %err, "cannot read the run tree's usage"),
            }
        }
        self.finish(&mut conversation, &report).await;
        report
    }

    /// The loop. `Ok(Some(text))` is a final answer. `input_stored`: the run's question is in its
    /// thread already (the history ends with it), so the run does not add it again.
    async fn steps(
        &self,
        conversation: &mut Conversation,
        resumed: Option<(crate::run::approval::Checkpoint, Vec<crate::run::approval::Decision>)>,
        input_stored: bool,
    ) -> Result<Option<String>, Stop> {
        let history = self.riding_through(|| self.store.thread_messages(&self.identity.thread_id)).await?;
        conversation.messages.push(Message::System { content: self.system_prompt.clone() });
        conversation.messages.extend(history);
        match resumed {
            None if !input_stored => conversation.push(Message::User { content: self.input.clone() }),
            None => {
                // The model reads its question last, even if the history lost it (trimmed, or its
                // conversation deleted meanwhile).
                let last_is_input =
                    matches!(conversation.messages.last(), Some(Message::User { content }) if *content == self.input);
                if !last_is_input {
                    conversation.tell_model(Message::User { content: self.input.clone() });
                }
            }
            Some((checkpoint, decisions)) => {
                for message in checkpoint.added {
                    conversation.push(message);
                }
                conversation.steps = checkpoint.steps;
                conversation.usage = checkpoint.usage;
                self.model.continue_after(checkpoint.steps);
                let message_id = format!("{}-{}", self.identity.run_id, conversation.steps);
                self.run_calls(conversation, checkpoint.remaining, &message_id, &decisions).await?;
            }
        }
        let specs = self.tools.specs();
        loop {
            self.stop_if_cancelled().await?;
            // A request steered to the front of the thread's queue takes over before the next model turn:
            // the run ends here, completed with what it has said (Yuxi's steer).
            if self.riding_through(|| self.store.is_steer_requested(&self.identity.run_id)).await? {
                let said = conversation.added.iter().rev().find_map(|m| match m {
                    Message::Assistant { content: Some(text), .. } if !text.is_empty() => Some(text.clone()),
                    _ => None,
                });
                return Ok(Some(said.unwrap_or_default()));
            }
            self.tell_ended_children(conversation).await?;
            if conversation.steps >= self.max_steps {
                return Err(Stop::Failed(format!(
                    "the run reached maxExecutionSteps ({}) without a final answer",
                    self.max_steps
                )));
            }
            if let Some(tree) = self.budget_used().await {
                return Err(Stop::Budget(tree));
            }
            conversation.steps += 1;
            let message_id = format!("{}-{}", self.identity.run_id, conversation.steps);
            let (turn, call) = self.call_model(&conversation.messages, &specs, &message_id).await?;
            let mut exhausted = None;
            if let Some(usage) = &turn.usage {
                exhausted = self.count_call(&mut conversation.usage, usage, &call).await?;
            }
            let content = (!turn.content.is_empty()).then(|| turn.content.clone());
            conversation.push(Message::Assistant { content, tool_calls: turn.tool_calls.clone() });
            // The turn that reached the budget is the run's last: its tool calls are not run.
            if let Some(tree) = exhausted {
                return Err(Stop::Budget(tree));
            }
            if turn.tool_calls.is_empty() {
                return Ok(Some(turn.content));
            }
            // Calls past the most a turn may make are answered at once; the others run in order, each
            // waiting for a person first when it must.
            let (calls, overflow) = turn.tool_calls.split_at(turn.tool_calls.len().min(MAX_TOOL_CALLS_PER_TURN));
            for call in overflow {
                let content = format!(
                    "Error: at most {MAX_TOOL_CALLS_PER_TURN} tool calls are run per turn; call the rest in the next turn"
                );
                conversation.push(Message::Tool { tool_call_id: call.id.clone(), content });
            }
            self.run_calls(conversation, calls.to_vec(), &message_id, &[]).await?;
        }
    }

    /// Tells the model, before its next turn, of each run it started in the background that has ended
    /// since, so it need not poll: a `user` message the model reads in this run (the thread does not
    /// keep it: the person did not say it), and a `custom` event `subagent_notice` for clients, which
    /// show it in their subagent cards.
    async fn tell_ended_children(&self, conversation: &mut Conversation) -> Result<(), Stop> {
        let Some(facade) = &self.delegation else { return Ok(()) };
        for ended in facade.ended_children().await {
            self.emit(
                EventKind::Custom,
                json!({"type": "subagent_notice", "run_id": ended.run_id, "status": ended.status, "subagent_slug": ended.subagent_slug}),
            )
            .await?;
            let notice =
                crate::delegation::prompt::child_ended_notice(&ended.run_id, &ended.subagent_slug, ended.status);
            conversation.tell_model(Message::User { content: notice });
        }
        Ok(())
    }

    /// Stops the loop when a cancel was requested: checked before every model call and every tool call,
    /// so a cancel set before the run starts, or between two steps, is never acted against.
    async fn stop_if_cancelled(&self) -> Result<(), Stop> {
        let asked = self.riding_through(|| self.store.is_cancel_requested(&self.identity.run_id)).await?;
        if asked { Err(Stop::Cancelled) } else { Ok(()) }
    }

    /// One model turn, retried on transient errors, its text streamed as batched `messages` events.
    async fn call_model(
        &self,
        messages: &[Message],
        specs: &[super::tools::ToolSpec],
        message_id: &str,
    ) -> Result<(ModelTurn, ModelCallEvent), Stop> {
        let mut attempt = 0;
        loop {
            match self.stream_turn(messages, specs, message_id).await? {
                (Ok(turn), call) => return Ok((turn, call)),
                (Err(err), _) if err.is_transient() && attempt < self.model_retries => {
                    attempt += 1;
                    let backoff = retry::backoff(attempt, &err);
                    tracing::event!(target: crate::telemetry::TARGET, tracing::Level::TRACE, yuxi.retry.attempt = attempt, yuxi.retry.backoff_ms = backoff.as_millis() as i64, error.type = "transient", "model_retry");
                    self.emit(
                        EventKind::Custom,
                        json!({"type": "model_retry", "attempt": attempt, "of": self.model_retries, "error": err.to_string(), "backoff_ms": backoff.as_millis() as u64}),
                    )
                    .await?;
                    tokio::time::sleep(backoff).await;
                }
                (Err(err), _) => {
                    let tries = attempt + 1;
                    return Err(Stop::Failed(format!(
                        "the model call failed after {tries} attempt{}: {err}",
                        if tries == 1 { "" } else { "s" }
                    )));
                }
            }
        }
    }

    /// Runs one tool call, writing the call and its result as `messages` events. A tool's failure is
    /// fed back to the model as the result, prefixed `Error:`.
    /// `arguments` are the model's, or a person's edit of them (`edited`, said in the event).
    async fn call_tool(
        &self,
        call: &ToolCall,
        arguments: &str,
        edited: bool,
        message_id: &str,
    ) -> Result<String, Stop> {
        let name = &call.function.name;
        let mut announced = json!({"type": "tool_call", "message_id": message_id, "tool_call_id": call.id, "name": name, "args": arguments});
        if edited {
            announced["edited_by_user"] = Value::Bool(true);
        }
        self.emit(EventKind::Messages, announced).await?;
        let context = crate::runner::tools::ToolContext::new(
            &call.id,
            &self.identity.run_id,
            &self.identity.thread_id,
            self.store.clone(),
        );
        let span = tracing::trace_span!(
            target: crate::telemetry::TARGET,
            "execute_tool",
            otel.name = %format!("execute_tool {name}"),
            otel.status_code = tracing::field::Empty,
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = %name,
            gen_ai.tool.call.id = %call.id,
            yuxi.tool.result_bytes = tracing::field::Empty,
            gen_ai.tool.call.arguments = tracing::field::Empty,
            gen_ai.tool.call.result = tracing::field::Empty,
        );
        if !span.is_disabled()
            && let Some(arguments) = crate::telemetry::content(arguments)
        {
            span.record("gen_ai.tool.call.arguments", arguments);
        }
        let called = self.tools.call_in(name, arguments, context.clone());
        let (content, is_error) = match tracing::Instrument::instrument(called, span.clone()).await {
            Ok(output) => (output, false),
            Err(err) => (format!("Error: {err}"), true),
        };
        span.record("yuxi.tool.result_bytes", content.len() as i64);
        if !span.is_disabled()
            && let Some(result) = crate::telemetry::content(&content)
        {
            span.record("gen_ai.tool.call.result", result);
        }
        if is_error {
            span.record("otel.status_code", "ERROR");
        }
        // Bounded for the model's context, the events and the history alike.
        let content = crate::run::event::cap_text(content, crate::run::event::MAX_TOOL_RESULT_BYTES);
        let mut result = json!({"type": "tool_result", "tool_call_id": call.id, "name": name, "content": content, "is_error": is_error});
        // A subagent tool's result names the child run, so a UI can nest the child's progress under the call.
        if let Some((run_id, thread_id)) = context.linked_child() {
            result["child_run_id"] = Value::String(run_id);
            result["child_thread_id"] = Value::String(thread_id);
        }
        self.emit(EventKind::Messages, result).await?;
        Ok(content)
    }

    /// Appends an event, riding through a store that is briefly away ([`Graph::riding_through`]).
    async fn emit(&self, event: EventKind, payload: Value) -> Result<(), StoreError> {
        if event == EventKind::Messages {
            self.first_message.get_or_init(jiff::Timestamp::now);
        }
        let (run_id, thread_id) = (&self.identity.run_id, &self.identity.thread_id);
        self.riding_through(|| self.store.append_event(run_id, thread_id, event, payload.clone())).await.map(|_| ())
    }

    /// Runs the store operation `op`, again with backoff and jitter while it certainly never reached the
    /// store ([`StoreError::is_unsent`]), for [`Graph::end_retry_for`] at most: a blip of the store pauses
    /// the run instead of failing it, and nothing is written twice.
    async fn riding_through<T, Fut>(&self, op: impl FnMut() -> Fut) -> Result<T, StoreError>
    where
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        use backon::Retryable;
        let backoff = backon::ExponentialBuilder::new()
            .with_min_delay(Duration::from_millis(100))
            .with_max_delay(Duration::from_secs(1))
            .with_jitter()
            .without_max_times()
            .with_total_delay(Some(self.end_retry_for));
        op.retry(backoff).when(StoreError::is_unsent).await
    }

    /// Persists the new messages, the result, `error` (when failed) and `end` in one step ([`record_end`]). A run stopped
    /// in the middle of a turn's tool calls gets an answer for each call left open, so the thread stays a
    /// valid conversation (chat APIs refuse a tool call without its result).
    async fn finish(&self, conversation: &mut Conversation, report: &RunReport) {
        crate::run::message::answer_open_calls(&mut conversation.added, report.status);
        let result = report.result(&self.identity);
        record_end(&self.store, &self.identity, &conversation.added, &result, self.end_retry_for).await;
    }
}
