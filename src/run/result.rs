//! A run's result: what the runner stores when the run ends, and what `subagent_await`, `task`, the
//! controller and the local launcher read back.

use serde::{Deserialize, Serialize};

use super::status::RunStatus;
use crate::resources::TokenUsage;

/// The stored result of a run that ended, as JSON `{status, output, error, agent_slug, run_id,
/// thread_id, token_usage}` (token counts in camelCase, as on the AgentRun's status).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// How it ended: `completed`, `failed` or `cancelled`.
    pub status: RunStatus,
    /// The final assistant text; empty unless completed.
    #[serde(default)]
    pub output: String,
    /// Why it failed.
    #[serde(default)]
    pub error: Option<String>,
    /// The agent's slug.
    #[serde(default)]
    pub agent_slug: String,
    /// The run.
    #[serde(default)]
    pub run_id: String,
    /// Its thread.
    #[serde(default)]
    pub thread_id: String,
    /// Tokens used, summed over the run's model calls.
    #[serde(default)]
    pub token_usage: TokenUsage,
    /// A CamelCase word saying why it ended so, when a rule ended it (`BudgetExceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// On the root of a run tree: the tokens the whole tree used, its own and every descendant's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_token_usage: Option<TokenUsage>,
    /// On the root of a run tree: what the whole tree's model calls cost, one amount per currency (none
    /// when no Model of the tree states a price).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tree_cost: Vec<crate::resources::CostAmount>,
}
