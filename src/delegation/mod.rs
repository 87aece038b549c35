//! Delegation, typed once for the facade that serves it and the runner that calls it: the seven subagent
//! tools' names and limits, the cursor of a run tree's stream ([`tree`]), their wire bodies ([`wire`]), what the parent's model is told ([`prompt`]),
//! and the progress summary of a child run ([`progress`]) (Yuxi's subagent design, "同步调用与异步调用": docs/concepts/delegation.md).

pub mod a2a;
pub mod progress;
pub mod prompt;
pub mod tree;
pub mod wire;

pub use prompt::{TaskOutcome, subagent_prompt, task_content, tool_schemas};

/// The longest `subagent_await` / `task` wait, in seconds, and the default one (Yuxi: 30 minutes).
pub const MAX_AWAIT_SECONDS: u64 = 1800;
/// The most events one `subagent_events` call returns (Yuxi: 50).
pub const MAX_EVENTS_LIMIT: usize = 50;
/// The events one `subagent_events` call returns when it names no `limit`.
pub const DEFAULT_EVENTS_LIMIT: usize = 20;
/// The most runs one `subagent_wait_any` call waits for.
pub const MAX_WAIT_ANY_RUNS: usize = 50;

/// The run id under which the children of a parent outside the system, named `named` by the user
/// `uid`, are kept: `x` and 32 hex digits of the SHA-256 of `uid`, a NUL and `named`. Each user's names
/// are their own: a name that another user's run has, or that another user also uses, never reaches
/// that run (its children, its stream, its cancel) nor that user's children, and the answer is the same
/// whether the name is used by someone else or by no one (docs/concepts/delegation.md).
pub fn outside_parent_run_id(uid: &str, named: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::new()
        .chain_update((uid.len() as u64).to_le_bytes())
        .chain_update(uid)
        .chain_update(named)
        .finalize();
    let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
    format!("x{hex}")
}

/// The tool names, as the model and the facade's routes spell them.
pub mod names {
    /// Start a child run and wait for its end.
    pub const TASK: &str = "task";
    /// Start a child run and return at once.
    pub const SUBAGENT_START: &str = "subagent_start";
    /// A child run's status and latest progress.
    pub const SUBAGENT_STATUS: &str = "subagent_status";
    /// A child run's events after a cursor.
    pub const SUBAGENT_EVENTS: &str = "subagent_events";
    /// Cancel a child run.
    pub const SUBAGENT_CANCEL: &str = "subagent_cancel";
    /// Wait for a child run's end.
    pub const SUBAGENT_AWAIT: &str = "subagent_await";
    /// Wait for the first of several child runs to end.
    pub const SUBAGENT_WAIT_ANY: &str = "subagent_wait_any";
    /// Not a tool of the model's: the runner asking for a token of its run's user for an MCP server
    /// (`POST /api/tools/caller_token`).
    pub const CALLER_TOKEN: &str = "caller_token";
    /// All seven, in the order the model is shown them.
    pub const ALL: [&str; 7] =
        [TASK, SUBAGENT_START, SUBAGENT_STATUS, SUBAGENT_EVENTS, SUBAGENT_CANCEL, SUBAGENT_AWAIT, SUBAGENT_WAIT_ANY];
}

#[cfg(test)]
mod tests {
    use super::outside_parent_run_id;
    use crate::run::thread_id::is_valid_id;

    #[test]
    fn an_outside_parents_name_is_its_users_own() {
        let alices = outside_parent_run_id("alice", "my-run-1");
        assert_eq!(alices, outside_parent_run_id("alice", "my-run-1"), "the same each time");
        assert_ne!(alices, outside_parent_run_id("bob", "my-run-1"), "another user's is another run");
        assert_ne!(outside_parent_run_id("a", "b\0c"), outside_parent_run_id("a\0b", "c"), "the parts stay apart");
        assert!(is_valid_id(&alices) && alices.len() == 33, "{alices}");
    }
}
