//! Who a run is, what it produced, and writing its end to the store.

use std::time::Duration;

use serde::Serialize;

use crate::resources::TokenUsage;
use crate::run::message::Message;
use crate::run::{RunResult, RunStatus};
use crate::store::{RunnerStoreClient, StoreError};

/// Who and what one run is.
#[derive(Clone, Debug)]
pub struct RunIdentity {
    /// The run id.
    pub run_id: String,
    /// The run's thread.
    pub thread_id: String,
    /// The agent's slug.
    pub agent_slug: String,
}

/// What a run produced.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    /// How it ended: `completed`, `failed` or `cancelled`.
    pub status: RunStatus,
    /// The final assistant text (empty unless completed).
    pub output: String,
    /// Why it failed.
    pub error: Option<String>,
    /// Tokens used, summed over the model calls.
    pub token_usage: TokenUsage,
    /// Why a rule ended it (`BudgetExceeded`).
    pub reason: Option<String>,
    /// On a tree's root: the tokens the whole tree used.
    pub tree_token_usage: Option<TokenUsage>,
    /// On a tree's root: what the whole tree cost, by currency.
    pub tree_cost: Vec<crate::resources::CostAmount>,
}

impl RunReport {
    /// The result stored for the run `identity`.
    pub fn result(&self, identity: &RunIdentity) -> RunResult {
        RunResult {
            status: self.status,
            output: self.output.clone(),
            error: self.error.clone(),
            agent_slug: identity.agent_slug.clone(),
            run_id: identity.run_id.clone(),
            thread_id: identity.thread_id.clone(),
            token_usage: self.token_usage.clone(),
            reason: self.reason.clone(),
            tree_token_usage: self.tree_token_usage.clone(),
            tree_cost: self.tree_cost.clone(),
        }
    }
}

/// Writes the run's end in one step ([`RunnerStoreClient::finish_run`]: messages, result, `error` and
/// `end`, record), trying again with backoff and jitter while the store fails, for `retry_for` at most
/// (the lease: past it the run is the sweeper's to end). A run ended already (cancelled while nobody
/// executed it, or swept) keeps that end.
pub async fn record_end(
    store: &RunnerStoreClient,
    identity: &RunIdentity,
    new_messages: &[Message],
    result: &crate::run::RunResult,
    retry_for: Duration,
) {
    use backon::Retryable;
    let (run_id, thread_id) = (&identity.run_id, &identity.thread_id);
    let backoff = backon::ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_jitter()
        .without_max_times()
        .with_total_delay(Some(retry_for));
    let write = || store.finish_run(run_id, thread_id, new_messages, result);
    let notify = |err: &StoreError, after: Duration| {
        tracing::warn!(run_id = %run_id, error = %err, retry_in_ms = after.as_millis() as u64, "cannot record the run's end yet");
    };
    match write.retry(backoff).notify(notify).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::info!(run_id = %run_id, "the run had been ended already; this runner's end is not recorded")
        }
        Err(err) => tracing::error!(
            run_id = %run_id,
            error = %err,
            "cannot record the run's end; once the lease lapses the sweeper ends the run interrupted"
        ),
    }
}

/// Ends a run that could not start: `metadata`, then the result, `error` and `end` in one step, as a
/// run that failed with `error`, or, without one, as a run cancelled before it started.
pub async fn fail_before_start(
    store: &RunnerStoreClient,
    identity: &RunIdentity,
    metadata: serde_json::Value,
    error: Option<String>,
    retry_for: Duration,
) -> RunReport {
    let report = RunReport {
        status: if error.is_some() { RunStatus::Failed } else { RunStatus::Cancelled },
        output: String::new(),
        error,
        token_usage: TokenUsage::default(),
        reason: None,
        tree_token_usage: None,
        tree_cost: Vec::new(),
    };
    if let Err(err) =
        store.append_event(&identity.run_id, &identity.thread_id, crate::run::EventKind::Metadata, metadata).await
    {
        tracing::warn!(run_id = %identity.run_id, error = %err, "cannot write the run's metadata");
    }
    record_end(store, identity, &[], &report.result(identity), retry_for).await;
    report
}
