//! A run's life in process: its events (never after its end), its thread's messages, its end
//! (whoever ends it, and as its runner reports it), its keeper and lease, its creation, its thread's
//! lock and owner, its record and status view, its status, steer and cancel requests, and its children.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{MemoryStore, seq_number};
use crate::run::message::Message;
use crate::run::{Created, Envelope, EventKind, RunLimit, RunLimits, RunRecord, RunResult, RunStatus, StoredEvent};
use crate::store::keys;
use crate::store::run_list::{ListedRun, RunCursor, created_ms};
use crate::store::types::{RunView, StoreError};

impl MemoryStore {
    pub(in crate::store) fn append_event(
        &self,
        run_id: &str,
        thread_id: &str,
        event: EventKind,
        payload: Value,
    ) -> Result<String, StoreError> {
        let envelope = Envelope::new(run_id, thread_id, event, payload, jiff::Timestamp::now().to_string());
        let seq = {
            let mut state = self.state();
            if state.results.contains_key(run_id) {
                return Err(StoreError::RunEnded { run_id: run_id.to_string() });
            }
            state.push_event(run_id, envelope)
        };
        self.notices.wake(run_id);
        Ok(seq)
    }

    pub(in crate::store) fn read_events(&self, run_id: &str, after_seq: &str, limit: usize) -> Vec<StoredEvent> {
        let after = seq_number(after_seq);
        self.state()
            .events
            .get(run_id)
            .map(|events| events.iter().filter(|e| seq_number(&e.seq) > after).take(limit).cloned().collect())
            .unwrap_or_default()
    }

    pub(in crate::store) fn recent_events(&self, run_id: &str, count: usize) -> Vec<StoredEvent> {
        let state = self.state();
        let Some(events) = state.events.get(run_id) else { return Vec::new() };
        events.iter().skip(events.len().saturating_sub(count)).cloned().collect()
    }

    pub(in crate::store) fn thread_messages(&self, thread_id: &str) -> Vec<Message> {
        self.state().threads.get(thread_id).cloned().unwrap_or_default()
    }

    /// The runner's end of its run, in one step (see [`Store::finish_run`](crate::store::Store::finish_run));
    /// `false`, writing nothing, when it had ended already.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::store) fn finish_run(
        &self,
        run_id: &str,
        thread_id: &str,
        new_messages: &[Message],
        result: &RunResult,
        record_status: RunStatus,
        error_event: Option<Envelope>,
        end: Envelope,
    ) -> bool {
        let mut state = self.state();
        let has_result = state.results.contains_key(run_id);
        match state.records.get_mut(run_id) {
            Some(record) if record.status.is_terminal() => return false,
            Some(record) => {
                record.status = record_status;
                record.waiting = None;
                record.ended_at = Some(end.created_at.clone());
                if let Some(error) = &result.error {
                    record.error = Some(error.clone());
                }
                if state.thread_locks.get(thread_id).is_some_and(|holder| holder == run_id) {
                    state.thread_locks.remove(thread_id);
                }
            }
            None if has_result => return false,
            None => {}
        }
        state.touch_thread(thread_id);
        let history = state.threads.entry(thread_id.to_string()).or_default();
        history.extend(new_messages.iter().cloned());
        if history.len() > keys::MAX_THREAD_MESSAGES {
            let excess = history.len() - keys::MAX_THREAD_MESSAGES;
            history.drain(..excess);
        }
        state.results.insert(run_id.to_string(), result.clone());
        for envelope in error_event.into_iter().chain([end]) {
            state.push_event(run_id, envelope);
        }
        state.keepers.remove(run_id);
        state.ended_now(run_id);
        drop(state);
        self.notices.wake(run_id);
        true
    }

    pub(in crate::store) fn keep_run(&self, run_id: &str, ttl: Duration) {
        self.state().keepers.insert(run_id.to_string(), Instant::now() + ttl);
    }

    pub(in crate::store) fn unfinished_runs(&self) -> Vec<String> {
        self.state().records.values().filter(|r| !r.status.is_terminal()).map(|r| r.run_id.clone()).collect()
    }

    pub(in crate::store) fn run_result(&self, run_id: &str) -> Option<RunResult> {
        self.state().results.get(run_id).cloned()
    }

    pub(in crate::store) fn request_steer(&self, run_id: &str) {
        self.state().steered.insert(run_id.to_string());
        self.notices.wake(run_id);
    }

    pub(in crate::store) fn is_steer_requested(&self, run_id: &str) -> bool {
        self.state().steered.contains(run_id)
    }

    pub(in crate::store) fn request_cancel(&self, run_id: &str) {
        self.state().cancelled.insert(run_id.to_string());
        self.cancel_notice.notify_waiters();
        self.notices.wake(run_id);
    }

    pub(in crate::store) fn hold_run_lease(&self, run_id: &str, holder: &str, ttl: Duration) -> bool {
        let mut state = self.state();
        let now = Instant::now();
        // As in Redis: taken when free or lapsed, renewed by its holder, refused to anyone else.
        if state.leases.get(run_id).is_some_and(|(current, until)| current != holder && *until > now) {
            return false;
        }
        state.leases.insert(run_id.to_string(), (holder.to_string(), now + ttl.max(Duration::from_millis(1))));
        true
    }

    pub(in crate::store) fn release_run_lease(&self, run_id: &str, holder: &str) {
        let mut state = self.state();
        if state.leases.get(run_id).is_some_and(|(current, _)| current == holder) {
            state.leases.remove(run_id);
        }
    }

    pub(in crate::store) fn create_run(
        &self,
        record: &RunRecord,
        start_key: Option<&str>,
        limits: RunLimits,
    ) -> Created {
        let mut state = self.state();
        if let Some(existing) = start_key.and_then(|k| state.starts.get(k)) {
            return Created::Existing(existing.clone());
        }
        // A lock whose run has ended (or is gone) is stale, as in Redis.
        if let Some(active) = state.thread_locks.get(&record.thread_id)
            && state.records.get(active).is_some_and(|r| !r.status.is_terminal())
        {
            return Created::Busy(active.clone());
        }
        let unfinished: Vec<&RunRecord> = state.records.values().filter(|r| !r.status.is_terminal()).collect();
        if unfinished.iter().filter(|r| r.uid == record.uid).count() >= limits.per_user {
            return Created::Limited(RunLimit::PerUser);
        }
        if unfinished.len() >= limits.total {
            return Created::Limited(RunLimit::Total);
        }
        state.records.insert(record.run_id.clone(), record.clone());
        let grace = Duration::from_secs(keys::START_GRACE_SECONDS as u64);
        state.keepers.insert(record.run_id.clone(), Instant::now() + grace);
        state.thread_locks.insert(record.thread_id.clone(), record.run_id.clone());
        state.thread_owners.entry(record.thread_id.clone()).or_insert_with(|| record.uid.clone());
        state.touch_thread(&record.thread_id);
        if let Some(key) = start_key {
            state.starts.insert(key.to_string(), record.run_id.clone());
            state.start_of.insert(record.run_id.clone(), key.to_string());
        }
        if let Some(parent) = &record.parent {
            state.children.entry(parent.run_id.clone()).or_default().push(record.run_id.clone());
        }
        Created::Started
    }

    pub(in crate::store) fn thread_active_run(&self, thread_id: &str) -> Option<String> {
        self.state().thread_locks.get(thread_id).cloned()
    }

    pub(in crate::store) fn thread_owner(&self, thread_id: &str) -> Option<String> {
        self.state().thread_owners.get(thread_id).cloned()
    }

    pub(in crate::store) fn claim_thread(&self, thread_id: &str, uid: &str) -> bool {
        let mut state = self.state();
        let claimed = state.thread_owners.entry(thread_id.to_string()).or_insert_with(|| uid.to_string()) == uid;
        if claimed {
            state.touch_thread(thread_id);
        }
        claimed
    }

    pub(in crate::store) fn run_view(&self, run_id: &str, recent: usize) -> Option<RunView> {
        let state = self.state();
        let record = state.records.get(run_id)?.clone();
        let events = state.events.get(run_id).map(Vec::as_slice).unwrap_or_default();
        Some(RunView {
            record,
            result: state.results.get(run_id).cloned(),
            recent: events[events.len().saturating_sub(recent)..].to_vec(),
        })
    }

    pub(in crate::store) fn run_record(&self, run_id: &str) -> Option<RunRecord> {
        self.state().records.get(run_id).cloned()
    }

    pub(in crate::store) fn end_run(
        &self,
        run_id: &str,
        status: RunStatus,
        error: Option<&str>,
        result: &RunResult,
        end: Envelope,
        only_if_abandoned: bool,
    ) -> bool {
        let mut state = self.state();
        let now = Instant::now();
        let kept = state.keepers.get(run_id).is_some_and(|until| *until > now)
            || state.leases.get(run_id).is_some_and(|(_, until)| *until > now);
        let Some(record) = state.records.get_mut(run_id) else { return false };
        if record.status.is_terminal() || (only_if_abandoned && kept) {
            return false;
        }
        record.status = status;
        record.waiting = None;
        record.ended_at = Some(end.created_at.clone());
        if let Some(error) = error {
            record.error = Some(error.to_string());
        }
        let thread_id = record.thread_id.clone();
        if state.thread_locks.get(&thread_id).is_some_and(|holder| holder == run_id) {
            state.thread_locks.remove(&thread_id);
        }
        state.results.entry(run_id.to_string()).or_insert_with(|| result.clone());
        state.push_event(run_id, end);
        state.keepers.remove(run_id);
        state.ended_now(run_id);
        drop(state);
        self.notices.wake(run_id);
        true
    }

    pub(in crate::store) fn set_run_status(&self, run_id: &str, status: RunStatus, error: Option<&str>) -> bool {
        let mut state = self.state();
        let Some(record) = state.records.get_mut(run_id) else { return false };
        if record.status.is_terminal() || (status == RunStatus::Running && record.status != RunStatus::Pending) {
            return false;
        }
        record.status = status;
        if let Some(error) = error {
            record.error = Some(error.to_string());
        }
        let thread = record.thread_id.clone();
        if status.is_terminal() {
            if state.thread_locks.get(&thread).is_some_and(|r| r == run_id) {
                state.thread_locks.remove(&thread);
            }
            state.ended_now(run_id);
        }
        drop(state);
        self.notices.wake(run_id);
        true
    }

    pub(in crate::store) fn is_cancel_requested(&self, run_id: &str) -> bool {
        self.state().cancelled.contains(run_id)
    }

    /// Resolves when a cancel is requested for the run: at once on the in-process notice, and by checking
    /// every `poll` as well.
    pub(in crate::store) async fn cancelled(&self, run_id: &str, poll: Duration) {
        loop {
            if self.is_cancel_requested(run_id) {
                return;
            }
            tokio::select! {
                () = self.cancel_notice.notified() => {}
                () = tokio::time::sleep(poll) => {}
            }
        }
    }

    pub(in crate::store) fn listed_runs(
        &self,
        uid: Option<&str>,
        after: Option<&RunCursor>,
        count: usize,
    ) -> Vec<ListedRun> {
        let state = self.state();
        let mut places: Vec<(RunCursor, &RunRecord)> = state
            .records
            .values()
            .filter(|record| uid.is_none_or(|uid| record.uid == uid))
            .map(|record| (RunCursor { created_ms: created_ms(record), run_id: record.run_id.clone() }, record))
            .filter(|(place, _)| after.is_none_or(|a| place < a))
            .collect();
        places.sort_by(|a, b| b.0.cmp(&a.0));
        places.into_iter().take(count).map(|(place, record)| (place, Some(record.clone()))).collect()
    }

    pub(in crate::store) fn children(&self, parent_run_id: &str) -> Vec<String> {
        self.state().children.get(parent_run_id).cloned().unwrap_or_default()
    }
}
