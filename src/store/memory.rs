//! The in-process backend of the run store: the local mode's store when it is given no Redis. Every
//! operation of [`Store`](super::Store) on maps behind one lock, with the same rules as the Redis backend
//! (one step under the lock where Redis uses a transaction or a script); a cancel request wakes its
//! waiters through an in-process notice. Nothing outlives the process. Its runner subprocesses reach it
//! over the store socket ([`super::socket`]).
//!
//! Its memory is bounded by a [`Retention`]: a run that has ended is forgotten (record, events, result,
//! cancel, idempotent start, list of children) once it is older than its time to live or more recent
//! ends push it out, and a thread (history, owner) once it has not been written for its time to live or
//! more recently written threads push it out, never while a run holds it. Redis forgets by time only
//! ([`super::keys`]); a process's memory needs a count as well.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Notify;

use super::StoreError;
use crate::run::message::Message;
use crate::run::{Created, Envelope, EventKind, RunLimit, RunLimits, RunRecord, RunResult, RunStatus, StoredEvent};

/// How much of what has ended the in-process store keeps. What is forgotten answers as a run or thread
/// that never existed (404 for a run, an empty history for a thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// The most runs that have ended kept at once; the earliest ended go first (`--keep-finished-runs`).
    pub finished_runs: usize,
    /// How long a run that has ended is kept (Redis keeps its events this long:
    /// [`super::keys::EVENTS_TTL_SECONDS`]).
    pub finished_run_ttl: Duration,
    /// The most threads kept at once; the least recently written go first (`--keep-threads`).
    pub threads: usize,
    /// How long a thread nobody writes is kept (as in Redis: [`super::keys::STATE_TTL_SECONDS`]).
    pub thread_ttl: Duration,
}

impl Default for Retention {
    /// 1,000 runs that have ended, for two hours; 1,000 threads, for 30 days.
    fn default() -> Self {
        Retention {
            finished_runs: 1000,
            finished_run_ttl: Duration::from_secs(super::keys::EVENTS_TTL_SECONDS as u64),
            threads: 1000,
            thread_ttl: Duration::from_secs(super::keys::STATE_TTL_SECONDS as u64),
        }
    }
}

/// The in-process store. Clones share the same state. Its operations are those of
/// [`Store`](super::Store), documented there; none can fail.
#[derive(Clone, Default)]
pub struct MemoryStore {
    state: Arc<Mutex<MemoryState>>,
    cancel_notice: Arc<Notify>,
    notices: super::notices::Notices,
    usage: super::usage::MemoryUsage,
}

#[derive(Default)]
struct MemoryState {
    retention: Retention,
    /// The runs that have ended, earliest first, with when they ended.
    ended: VecDeque<(Instant, String)>,
    /// When each thread was last written, by a counter that orders writes.
    thread_writes: HashMap<String, (u64, Instant)>,
    /// The threads in the order of their writes (a thread written again has a stale entry further up,
    /// skipped when it comes first).
    thread_order: VecDeque<(u64, String)>,
    writes: u64,
    /// The idempotent start key of each run that has one.
    start_of: HashMap<String, String>,
    events: HashMap<String, Vec<StoredEvent>>,
    last_seq: u64,
    threads: HashMap<String, Vec<Message>>,
    results: HashMap<String, RunResult>,
    cancelled: HashSet<String>,
    /// The runs asked to end at their next model turn.
    steered: HashSet<String>,
    /// The holder of each run's lease, and when it lapses.
    leases: HashMap<String, (String, Instant)>,
    /// When each run's keeper lapses.
    keepers: HashMap<String, Instant>,
    records: HashMap<String, RunRecord>,
    thread_locks: HashMap<String, String>,
    starts: HashMap<String, String>,
    thread_owners: HashMap<String, String>,
    children: HashMap<String, Vec<String>>,
    /// The threads' request queues.
    queues: super::queues::Queues,
    /// The threads' conversations, forgotten with their threads.
    conversations: HashMap<String, crate::run::conversation::Conversation>,
    /// What each paused run keeps, and the decisions a resume gave it.
    checkpoints: HashMap<String, (crate::run::approval::Checkpoint, Option<Vec<crate::run::approval::Decision>>)>,
}

impl MemoryStore {
    /// An empty store that keeps what `retention` allows.
    pub fn with_retention(retention: Retention) -> MemoryStore {
        let store = MemoryStore::default();
        store.state().retention = retention;
        store
    }

    /// How many runs (ended or not) and threads the store holds now.
    pub fn held(&self) -> (usize, usize) {
        let state = self.state();
        (state.records.len().max(state.results.len()), state.threads.len().max(state.thread_owners.len()))
    }

    /// Forgets what the retention no longer allows at `now` (also done whenever a run ends or a thread
    /// is written); the sweeper calls it for what ages out while nothing happens.
    pub(super) fn forget_expired(&self) {
        self.state().forget(Instant::now());
    }

    fn state(&self) -> MutexGuard<'_, MemoryState> {
        self.state.lock().expect("store lock")
    }

    /// The token usage counts ([`super::usage`]).
    pub(super) fn usage(&self) -> &super::usage::MemoryUsage {
        &self.usage
    }

    pub(super) fn watch(&self, run_id: &str) -> super::notices::RunWatch {
        self.notices.watch(run_id)
    }

    pub(super) fn append_event(
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

    pub(super) fn read_events(&self, run_id: &str, after_seq: &str, limit: usize) -> Vec<StoredEvent> {
        let after = seq_number(after_seq);
        self.state()
            .events
            .get(run_id)
            .map(|events| events.iter().filter(|e| seq_number(&e.seq) > after).take(limit).cloned().collect())
            .unwrap_or_default()
    }

    pub(super) fn recent_events(&self, run_id: &str, count: usize) -> Vec<StoredEvent> {
        let state = self.state();
        let Some(events) = state.events.get(run_id) else { return Vec::new() };
        events.iter().skip(events.len().saturating_sub(count)).cloned().collect()
    }

    pub(super) fn thread_messages(&self, thread_id: &str) -> Vec<Message> {
        self.state().threads.get(thread_id).cloned().unwrap_or_default()
    }

    /// The runner's end of its run, in one step (see [`super::Store::finish_run`]); `false`, writing
    /// nothing, when it had ended already.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_run(
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
        if history.len() > super::keys::MAX_THREAD_MESSAGES {
            let excess = history.len() - super::keys::MAX_THREAD_MESSAGES;
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

    /// Pauses a running run for a person ([`super::Store::pause_run`]).
    pub(super) fn pause_run(
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
    pub(super) fn run_checkpoint(&self, run_id: &str) -> Option<crate::run::approval::Checkpoint> {
        self.state().checkpoints.get(run_id).map(|(checkpoint, _)| checkpoint.clone())
    }

    /// Resumes a waiting run with `decisions` ([`super::Store::resume_run`]).
    pub(super) fn resume_run(&self, run_id: &str, decisions: Vec<crate::run::approval::Decision>) -> bool {
        let mut state = self.state();
        let Some(record) = state.records.get_mut(run_id) else { return false };
        if record.status != RunStatus::Waiting {
            return false;
        }
        record.status = RunStatus::Pending;
        record.waiting = None;
        let Some(entry) = state.checkpoints.get_mut(run_id) else { return false };
        entry.1 = Some(decisions);
        state.keepers.remove(run_id);
        drop(state);
        self.notices.wake(run_id);
        true
    }

    /// Takes a resumed run's checkpoint and decisions, once.
    pub(super) fn take_resumption(
        &self,
        run_id: &str,
    ) -> Option<(crate::run::approval::Checkpoint, Vec<crate::run::approval::Decision>)> {
        let mut state = self.state();
        if !state.checkpoints.get(run_id).is_some_and(|(_, decisions)| decisions.is_some()) {
            return None;
        }
        state.checkpoints.remove(run_id).and_then(|(checkpoint, decisions)| decisions.map(|d| (checkpoint, d)))
    }

    pub(super) fn keep_run(&self, run_id: &str, ttl: Duration) {
        self.state().keepers.insert(run_id.to_string(), Instant::now() + ttl);
    }

    pub(super) fn unfinished_runs(&self) -> Vec<String> {
        self.state().records.values().filter(|r| !r.status.is_terminal()).map(|r| r.run_id.clone()).collect()
    }

    pub(super) fn run_result(&self, run_id: &str) -> Option<RunResult> {
        self.state().results.get(run_id).cloned()
    }

    pub(super) fn request_steer(&self, run_id: &str) {
        self.state().steered.insert(run_id.to_string());
        self.notices.wake(run_id);
    }

    pub(super) fn is_steer_requested(&self, run_id: &str) -> bool {
        self.state().steered.contains(run_id)
    }

    pub(super) fn request_cancel(&self, run_id: &str) {
        self.state().cancelled.insert(run_id.to_string());
        self.cancel_notice.notify_waiters();
        self.notices.wake(run_id);
    }

    pub(super) fn hold_run_lease(&self, run_id: &str, holder: &str, ttl: Duration) -> bool {
        let mut state = self.state();
        let now = Instant::now();
        // As in Redis: taken when free or lapsed, renewed by its holder, refused to anyone else.
        if state.leases.get(run_id).is_some_and(|(current, until)| current != holder && *until > now) {
            return false;
        }
        state.leases.insert(run_id.to_string(), (holder.to_string(), now + ttl.max(Duration::from_millis(1))));
        true
    }

    pub(super) fn release_run_lease(&self, run_id: &str, holder: &str) {
        let mut state = self.state();
        if state.leases.get(run_id).is_some_and(|(current, _)| current == holder) {
            state.leases.remove(run_id);
        }
    }

    pub(super) fn create_run(&self, record: &RunRecord, start_key: Option<&str>, limits: RunLimits) -> Created {
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
        let grace = Duration::from_secs(super::keys::START_GRACE_SECONDS as u64);
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

    /// `f` on the request queues, under the store's lock.
    pub(super) fn lock_queues<T>(&self, f: impl FnOnce(&mut super::queues::Queues) -> T) -> T {
        f(&mut self.state().queues)
    }

    pub(super) fn put_conversation(&self, conversation: &crate::run::conversation::Conversation) {
        let mut state = self.state();
        state.conversations.insert(conversation.thread_id.clone(), conversation.clone());
        state.touch_thread(&conversation.thread_id);
    }

    pub(super) fn change_conversation(
        &self,
        thread_id: &str,
        change: &crate::run::conversation::ConversationChange,
        now: &str,
    ) -> bool {
        let mut state = self.state();
        let Some(conversation) = state.conversations.get_mut(thread_id) else { return false };
        change.apply(conversation, now);
        if change.touches() {
            state.touch_thread(thread_id);
        }
        true
    }

    pub(super) fn conversation(&self, thread_id: &str) -> Option<crate::run::conversation::Conversation> {
        self.state().conversations.get(thread_id).cloned()
    }

    /// The user's conversations, most recently written first (a scan: the retention bounds them all).
    pub(super) fn user_conversations(
        &self,
        uid: &str,
        offset: usize,
        limit: usize,
    ) -> Vec<crate::run::conversation::Conversation> {
        let state = self.state();
        let mut mine: Vec<_> = state
            .conversations
            .values()
            .filter(|c| c.uid == uid)
            .map(|c| (state.thread_writes.get(&c.thread_id).map_or(0, |(at, _)| *at), c))
            .collect();
        mine.sort_by_key(|(at, _)| std::cmp::Reverse(*at));
        mine.into_iter()
            .take(crate::run::conversation::MAX_CONVERSATIONS_PER_USER)
            .skip(offset)
            .take(limit)
            .map(|(_, c)| c.clone())
            .collect()
    }

    pub(super) fn delete_conversation(&self, conversation: &crate::run::conversation::Conversation) {
        let mut state = self.state();
        state.conversations.remove(&conversation.thread_id);
        state.threads.remove(&conversation.thread_id);
    }

    pub(super) fn thread_active_run(&self, thread_id: &str) -> Option<String> {
        self.state().thread_locks.get(thread_id).cloned()
    }

    pub(super) fn thread_owner(&self, thread_id: &str) -> Option<String> {
        self.state().thread_owners.get(thread_id).cloned()
    }

    pub(super) fn claim_thread(&self, thread_id: &str, uid: &str) -> bool {
        let mut state = self.state();
        let claimed = state.thread_owners.entry(thread_id.to_string()).or_insert_with(|| uid.to_string()) == uid;
        if claimed {
            state.touch_thread(thread_id);
        }
        claimed
    }

    pub(super) fn run_view(&self, run_id: &str, recent: usize) -> Option<super::RunView> {
        let state = self.state();
        let record = state.records.get(run_id)?.clone();
        let events = state.events.get(run_id).map(Vec::as_slice).unwrap_or_default();
        Some(super::RunView {
            record,
            result: state.results.get(run_id).cloned(),
            recent: events[events.len().saturating_sub(recent)..].to_vec(),
        })
    }

    pub(super) fn run_record(&self, run_id: &str) -> Option<RunRecord> {
        self.state().records.get(run_id).cloned()
    }

    pub(super) fn end_run(
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

    pub(super) fn set_run_status(&self, run_id: &str, status: RunStatus, error: Option<&str>) -> bool {
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

    pub(super) fn is_cancel_requested(&self, run_id: &str) -> bool {
        self.state().cancelled.contains(run_id)
    }

    /// Resolves when a cancel is requested for the run: at once on the in-process notice, and by checking
    /// every `poll` as well.
    pub(super) async fn cancelled(&self, run_id: &str, poll: Duration) {
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

    pub(super) fn children(&self, parent_run_id: &str) -> Vec<String> {
        self.state().children.get(parent_run_id).cloned().unwrap_or_default()
    }
}

impl MemoryState {
    /// Notes that the run has just ended, and forgets what that pushes out.
    fn ended_now(&mut self, run_id: &str) {
        let now = Instant::now();
        self.ended.push_back((now, run_id.to_string()));
        self.forget(now);
    }

    /// Notes a write of the thread, and forgets what that pushes out.
    fn touch_thread(&mut self, thread_id: &str) {
        let now = Instant::now();
        self.writes += 1;
        self.thread_writes.insert(thread_id.to_string(), (self.writes, now));
        self.thread_order.push_back((self.writes, thread_id.to_string()));
        // Stale entries (threads written again since) are dropped when they outnumber the threads.
        if self.thread_order.len() > 2 * self.thread_writes.len() + 64 {
            let writes = &self.thread_writes;
            self.thread_order.retain(|(at, thread)| writes.get(thread).is_some_and(|(last, _)| last == at));
        }
        self.forget(now);
    }

    /// Forgets the runs that ended and the threads the retention no longer allows at `now`.
    fn forget(&mut self, now: Instant) {
        let retention = self.retention;
        while let Some((ended_at, _)) = self.ended.front() {
            let expired = now.saturating_duration_since(*ended_at) >= retention.finished_run_ttl;
            if !expired && self.ended.len() <= retention.finished_runs {
                break;
            }
            let (_, run_id) = self.ended.pop_front().expect("a front entry");
            self.forget_run(&run_id);
        }
        let mut spared = Vec::new();
        while let Some((at, thread_id)) = self.thread_order.front().cloned() {
            let Some(&(last, written)) = self.thread_writes.get(&thread_id) else {
                self.thread_order.pop_front();
                continue;
            };
            if last != at {
                self.thread_order.pop_front();
                continue;
            }
            let expired = now.saturating_duration_since(written) >= retention.thread_ttl;
            if !expired && self.thread_writes.len() - spared.len() <= retention.threads {
                break;
            }
            self.thread_order.pop_front();
            // A thread a run holds stays, whatever its age.
            if self
                .thread_locks
                .get(&thread_id)
                .is_some_and(|run| self.records.get(run).is_some_and(|r| !r.status.is_terminal()))
            {
                spared.push((at, thread_id));
                continue;
            }
            self.thread_writes.remove(&thread_id);
            self.threads.remove(&thread_id);
            self.thread_owners.remove(&thread_id);
            self.thread_locks.remove(&thread_id);
            self.conversations.remove(&thread_id);
        }
        for entry in spared.into_iter().rev() {
            self.thread_order.push_front(entry);
        }
    }

    /// Forgets everything of one run that has ended.
    fn forget_run(&mut self, run_id: &str) {
        if self.records.get(run_id).is_some_and(|r| !r.status.is_terminal()) {
            return;
        }
        if let Some(parent) = self.records.remove(run_id).and_then(|r| r.parent)
            && let Some(children) = self.children.get_mut(&parent.run_id)
        {
            children.retain(|child| child != run_id);
            if children.is_empty() {
                self.children.remove(&parent.run_id);
            }
        }
        self.events.remove(run_id);
        self.checkpoints.remove(run_id);
        self.results.remove(run_id);
        self.cancelled.remove(run_id);
        self.steered.remove(run_id);
        self.leases.remove(run_id);
        self.keepers.remove(run_id);
        self.children.remove(run_id);
        if let Some(key) = self.start_of.remove(run_id)
            && self.starts.get(&key).is_some_and(|r| r == run_id)
        {
            self.starts.remove(&key);
        }
    }

    /// Appends `envelope` to the run's events, bounded as the Redis stream is (MAXLEN: the oldest go
    /// first); returns its id.
    fn push_event(&mut self, run_id: &str, envelope: Envelope) -> String {
        self.last_seq += 1;
        let seq = format!("{}-0", self.last_seq);
        let events = self.events.entry(run_id.to_string()).or_default();
        events.push(StoredEvent { seq: seq.clone(), envelope });
        if events.len() > super::keys::EVENTS_MAX_LEN {
            let excess = events.len() - super::keys::EVENTS_MAX_LEN;
            events.drain(..excess);
        }
        seq
    }
}

/// The number before the `-` of an event id (`7-0` is 7); 0 for anything else, such as `0-0`.
fn seq_number(seq: &str) -> u64 {
    seq.split('-').next().and_then(|n| n.parse().ok()).unwrap_or(0)
}
