//! What a run's model calls use: each call counted (tokens, and its cost when the Model states a
//! price) in the run, its tree, the day's counts and the model's totals; and the tree's budget read
//! before each call.

use super::{Graph, Stop};
use crate::resources::TokenUsage;
use crate::run::budget::{ModelCall, TreeUsage};
use crate::run::timeline::ModelCallEvent;

impl Graph {
    /// Counts one model call's `usage` in the run's own count (`own`) and in the store; answers the
    /// tree when it has now used its budget (in tokens or in cost).
    /// `timing` is the call's record: its latency and time to the first token go into the model's
    /// histograms.
    pub(super) async fn count_call(
        &self,
        own: &mut TokenUsage,
        usage: &TokenUsage,
        timing: &ModelCallEvent,
    ) -> Result<Option<TreeUsage>, Stop> {
        own.prompt_tokens += usage.prompt_tokens;
        own.completion_tokens += usage.completion_tokens;
        own.total_tokens += usage.total_tokens;
        own.cached_prompt_tokens += usage.cached_prompt_tokens;
        let day = crate::run::budget::day_of(jiff::Timestamp::now());
        let call = ModelCall {
            usage: usage.clone(),
            cost: crate::resources::model::cost_picos(usage, self.pricing.as_ref()),
            model: self.model_id.clone(),
            latency_ms: Some(timing.duration_ms),
            time_to_first_token_ms: timing.time_to_first_token_ms,
        };
        let tree = self.riding_through(|| self.store.record_usage(&self.usage, &call, &day)).await?;
        Ok(tree.exhausted().then_some(tree))
    }

    /// The tree's usage when the run may be under a budget and its tree has used it; `None` otherwise,
    /// and when the store cannot say (the next check asks again). A priced run reads it even without a
    /// budget of its own: its tree's root may have set one in cost.
    pub(super) async fn budget_used(&self) -> Option<TreeUsage> {
        if self.usage.max_tokens.is_none() && self.usage.max_cost.is_none() && self.pricing.is_none() {
            return None;
        }
        match self.riding_through(|| self.store.tree_usage(&self.usage.root_run_id)).await {
            Ok(tree) => tree.exhausted().then_some(tree),
            Err(err) => {
                tracing::warn!(run_id = %self.identity.run_id, error = %err, "cannot read the run tree's usage");
                None
            }
        }
    }
}
