//! The run status: one vocabulary for every role. The facade and the run store spell it in snake_case
//! (Yuxi's run states: `pending`, `running`, `cancel_requested`, `completed`, `failed`, `cancelled`,
//! `interrupted`); the AgentRun's `status.phase` is the same status in the CRD's CamelCase spelling
//! ([`AgentRunPhase`], converted both ways here).

use serde::{Deserialize, Serialize};

use crate::resources::AgentRunPhase;

/// Where a run is, as the facade reports it (Yuxi's run states).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Created, not yet executing.
    Pending,
    /// Executing.
    Running,
    /// A cancel was asked for; the runner is stopping.
    CancelRequested,
    /// Paused before a tool call a person must approve: no process runs it; a `resume` with the
    /// person's decisions continues it ([`crate::run::approval`]). Not Yuxi's `interrupted`, which this
    /// system keeps for a run the system stopped (terminal).
    Waiting,
    /// Finished with an answer.
    Completed,
    /// Finished with an error.
    Failed,
    /// Stopped by a cancel.
    Cancelled,
    /// Stopped by something outside the run (its process or pod went away).
    Interrupted,
}

impl RunStatus {
    /// Every status, in the order a run can reach them.
    pub const ALL: [RunStatus; 8] = [
        Self::Pending,
        Self::Running,
        Self::CancelRequested,
        Self::Waiting,
        Self::Completed,
        Self::Failed,
        Self::Cancelled,
        Self::Interrupted,
    ];

    /// The statuses a run never leaves.
    pub const TERMINAL: [RunStatus; 4] = [Self::Completed, Self::Failed, Self::Cancelled, Self::Interrupted];

    /// Whether the run has ended (the AgentRun phase's rule: one definition).
    pub fn is_terminal(self) -> bool {
        AgentRunPhase::from(self).is_terminal()
    }

    /// The status as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::CancelRequested => "cancel_requested",
            Self::Waiting => "waiting",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
        }
    }
}

impl std::fmt::Display for RunStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<AgentRunPhase> for RunStatus {
    fn from(phase: AgentRunPhase) -> Self {
        match phase {
            AgentRunPhase::Pending => Self::Pending,
            AgentRunPhase::Running => Self::Running,
            AgentRunPhase::CancelRequested => Self::CancelRequested,
            AgentRunPhase::Waiting => Self::Waiting,
            AgentRunPhase::Completed => Self::Completed,
            AgentRunPhase::Failed => Self::Failed,
            AgentRunPhase::Cancelled => Self::Cancelled,
            AgentRunPhase::Interrupted => Self::Interrupted,
        }
    }
}

impl From<RunStatus> for AgentRunPhase {
    fn from(status: RunStatus) -> Self {
        match status {
            RunStatus::Pending => Self::Pending,
            RunStatus::Running => Self::Running,
            RunStatus::CancelRequested => Self::CancelRequested,
            RunStatus::Waiting => Self::Waiting,
            RunStatus::Completed => Self::Completed,
            RunStatus::Failed => Self::Failed,
            RunStatus::Cancelled => Self::Cancelled,
            RunStatus::Interrupted => Self::Interrupted,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips_through_the_agent_run_phase_and_keeps_its_terminality() {
        for status in RunStatus::ALL {
            let phase = AgentRunPhase::from(status);
            assert_eq!(RunStatus::from(phase), status);
            assert_eq!(phase.is_terminal(), status.is_terminal(), "{status}");
            // The CRD spells the phase in CamelCase, the API in snake_case, and they name the same state.
            let camel = serde_json::to_value(phase).unwrap();
            let snake = serde_json::to_value(status).unwrap();
            assert_eq!(camel.as_str().unwrap().to_lowercase(), snake.as_str().unwrap().replace('_', ""));
        }
        assert_eq!(
            RunStatus::TERMINAL.to_vec(),
            RunStatus::ALL.into_iter().filter(|s| s.is_terminal()).collect::<Vec<_>>()
        );
    }
}
