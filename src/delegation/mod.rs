//! Delegation, typed once for the facade that serves it and the runner that calls it: the seven subagent
//! tools' names and limits, the cursor of a run tree's stream ([`tree`]), their wire bodies ([`wire`]), what the parent's model is told ([`prompt`]),
//! and the progress summary of a child run ([`progress`]) (Yuxi's subagent design, "同步调用与异步调用": docs/concepts/delegation.md).

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
    /// All seven, in the order the model is shown them.
    pub const ALL: [&str; 7] =
        [TASK, SUBAGENT_START, SUBAGENT_STATUS, SUBAGENT_EVENTS, SUBAGENT_CANCEL, SUBAGENT_AWAIT, SUBAGENT_WAIT_ANY];
}
