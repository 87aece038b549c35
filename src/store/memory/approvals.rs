//! Runs paused for a person's approval, in process: pausing a running run with its checkpoint, reading
//! the checkpoint, resuming it with decisions, and its next runner's taking them once; the approval
//! operations of the store, for both backends, are in [`crate::store::approvals`].

use std::time::{Duration, Instant};

use super::MemoryStore;
use crate::run::{Envelope, RunStatus};

impl MemoryStore {
    /// Pauses a running run for a person ([`Store::pause_run`](crate::store::Store::pause_run)).
    pub(in crate::store) fn pause_run(
        &self,
        run_id: &str,
        checkpoint: crate::run::approval::Checkpoint,
        waiting: crate::run::approval::Waiting,
        interrupt: Envelope,
        keep: Duration,
    ) -> bool {
        let mut state = self.state();
        if state.results.contains_key(run_id) {
            return false;
        }
        let Some(record) = state.records.get_mut(run_id) else { return false };
        if record.status != RunStatus::Running {
            return false;
        }
        record.status = RunStatus::Waiting;
        record.waiting = Some(waiting);
        state.checkpoints.insert(run_id.to_string(), (checkpoint, None));
        state.push_event(run_id, interrupt);
        state.keepers.insert(run_id.to_string(), Instant::now() + keep);
        drop(state);
        self.notices.wake(run_id);
        true
    }

    /// A paused run's checkpoint.
    pub(in crate::store) fn run_checkpoint(&self, run_id: &str) -> Option<crate::run::approval::Checkpoint> {
        self.state().checkpoints.get(run_id).map(|(checkpoint, _)| checkpoint.clone())
    }

    /// Resumes a waiting run with `decisions` ([`Store::resume_run`](crate::store::Store::resume_run)).
    pub(in crate::store) fn resume_run(
        &self,
        run_id: &str,
        decisions: Vec<crate::run::approval::Decision>,
        decided: &[crate::run::approval::ApprovalRecord],
    ) -> bool {
        let mut state = self.state();
        // Nothing changes unless the run waits and its checkpoint is there, as in Redis.
        if !state.records.get(run_id).is_some_and(|r| r.status == RunStatus::Waiting)
            || !state.checkpoints.contains_key(run_id)
        {
            return false;
        }
        if let Some(entry) = state.checkpoints.get_mut(run_id) {
            entry.1 = Some(decisions);
        }
        if let Some(record) = state.records.get_mut(run_id) {
            record.status = RunStatus::Pending;
            record.waiting = None;
            record.approvals = crate::run::approval::appended(&record.approvals, decided);
        }
        // Kept for its next runner, as a new run is, until its launcher keeps it.
        let grace = Duration::from_secs(crate::store::keys::START_GRACE_SECONDS as u64);
        state.keepers.insert(run_id.to_string(), Instant::now() + grace);
        drop(state);
        self.notices.wake(run_id);
        true
    }

    /// Takes a resumed run's checkpoint and decisions, once.
    pub(in crate::store) fn take_resumption(
        &self,
        run_id: &str,
    ) -> Option<(crate::run::approval::Checkpoint, Vec<crate::run::approval::Decision>)> {
        let mut state = self.state();
        if !state.checkpoints.get(run_id).is_some_and(|(_, decisions)| decisions.is_some()) {
            return None;
        }
        state.checkpoints.remove(run_id).and_then(|(checkpoint, decisions)| decisions.map(|d| (checkpoint, d)))
    }
}
