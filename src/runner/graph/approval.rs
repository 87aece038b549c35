//! The graph's side of human approval ([`crate::run::approval`]): a turn's calls run in order, and the
//! first that waits for a person pauses the run: its checkpoint saved with the calls not yet run, an
//! `interrupt` event, its status `waiting`; the runner then ends (a paused run costs no process). A
//! resumed run runs the calls as the person decided before its loop goes on.

use std::time::Duration;

use serde_json::{Value, json};

use super::{Conversation, Graph, RunReport, Stop};
use crate::run::RunStatus;
use crate::run::approval::{
    APPROVAL_REQUIRED, ActionRequest, Checkpoint, Decision, InterruptPayload, Resolved, Waiting, resolve,
};
use crate::run::message::{Message, ToolCall};

impl Graph {
    /// Runs `calls` of the turn `message_id` in order, as `decisions` say for those decided. The first
    /// call that waits for a person and has no decision stops the loop with [`Stop::Pause`], with the
    /// calls not yet run and those among them that wait.
    pub(super) async fn run_calls(
        &self,
        conversation: &mut Conversation,
        calls: Vec<ToolCall>,
        message_id: &str,
        decisions: &[Decision],
    ) -> Result<(), Stop> {
        let waits = |call: &ToolCall| {
            let name = call.function.name.as_str();
            !decisions.iter().any(|d| d.tool_call_id == call.id)
                && self.approval.needs_approval(name, self.tool_servers.get(name).map(String::as_str))
        };
        for (i, call) in calls.iter().enumerate() {
            self.stop_if_cancelled().await?;
            if waits(call) {
                let pending = calls[i..].iter().filter(|c| waits(c)).map(ActionRequest::of).collect();
                return Err(Stop::Pause { remaining: calls[i..].to_vec(), pending });
            }
            let decision = decisions.iter().find(|d| d.tool_call_id == call.id);
            let content = match resolve(call, decision) {
                Resolved::Run(arguments) => {
                    let edited = arguments != call.function.arguments;
                    self.call_tool(call, &arguments, edited, message_id).await?
                }
                Resolved::Answer(text) => {
                    let rejected = json!({"type": "tool_result", "tool_call_id": call.id, "name": call.function.name,
                                          "content": text, "is_error": false, "rejected_by_user": true});
                    self.emit(crate::run::EventKind::Messages, rejected).await?;
                    text
                }
            };
            conversation.push(Message::Tool { tool_call_id: call.id.clone(), content });
        }
        Ok(())
    }

    /// Pauses the run: its checkpoint (the conversation so far, `remaining` calls, `left` of its
    /// deadline) and `pending` calls saved, the `interrupt` event written, its status `waiting`, all in
    /// one step of the store, kept until the decisions are due. The report of a paused run; errors: the
    /// run is no longer running (cancelled meanwhile: [`Stop::Cancelled`]), or the store failed.
    pub(super) async fn pause(
        &self,
        conversation: &Conversation,
        remaining: Vec<ToolCall>,
        pending: Vec<ActionRequest>,
        left: Duration,
    ) -> Result<RunReport, Stop> {
        let expires_at =
            jiff::Timestamp::now() + jiff::SignedDuration::try_from(self.approval_timeout).unwrap_or_default();
        let expires_at = expires_at.to_string();
        let checkpoint = Checkpoint {
            added: conversation.added.clone(),
            steps: conversation.steps,
            usage: conversation.usage.clone(),
            remaining,
            pending: pending.clone(),
            remaining_seconds: left.as_secs().max(1),
            decisions: Vec::new(),
            input: self.input.clone(),
        };
        let waiting = Waiting {
            reason: APPROVAL_REQUIRED.into(),
            action_requests: pending.clone(),
            expires_at: expires_at.clone(),
        };
        let payload = InterruptPayload { kind: "approval_required".into(), action_requests: pending, expires_at };
        let payload: Value = serde_json::to_value(payload).expect("an interrupt serializes");
        // Kept a little past the time-out, so that the sweeper ends it with the time-out's reason.
        let keep = self.approval_timeout + Duration::from_secs(120);
        let (run_id, thread_id) = (&self.identity.run_id, &self.identity.thread_id);
        let paused = self
            .riding_through(|| self.store.pause_run(run_id, thread_id, &checkpoint, &waiting, payload.clone(), keep))
            .await;
        if paused.as_ref().is_ok_and(|p| *p) {
            tracing::event!(target: crate::telemetry::TARGET, tracing::Level::TRACE, yuxi.approval.calls = waiting.action_requests.len() as i64, yuxi.approval.expires_at = %waiting.expires_at, "approval_requested");
        }
        match paused {
            Ok(true) => Ok(RunReport {
                status: RunStatus::Waiting,
                output: String::new(),
                error: None,
                token_usage: conversation.usage.clone(),
                reason: Some(APPROVAL_REQUIRED.into()),
                tree_token_usage: None,
                tree_cost: Vec::new(),
            }),
            Ok(false) => Err(Stop::Cancelled),
            Err(err) => Err(Stop::Failed(format!("the run could not pause for approval: {err}"))),
        }
    }
}
