//! The in-process backend of the run store: the local mode's store when it is given no Redis. Every
//! operation of [`Store`](super::Store) on maps behind one lock, with the same rules as the Redis backend
//! (one step under the lock where Redis uses a transaction or a script); a cancel request wakes its
//! waiters through an in-process notice. Nothing outlives the process. Its runner subprocesses reach it
//! over the store socket ([`super::socket`]).
//!
//! Its memory is bounded by a [`Retention`]: a run that has ended is forgotten (record, events, result,
//! cancel, idempotent start, list of children) once it is older than its time to live or more recent
//! ends push it out, and a thread (history, owner, conversation) once it has not been written for its
//! time to live or more recently written threads *of the same user* push it out, never while a run
//! holds it: one user's threads never push out another's. Redis forgets by time, and each user's
//! conversations by the same count ([`super::keys`]); a process's memory needs a count as well.
//!
//! This file holds the store and its state, with how the state forgets; the operations are in files by
//! concern, each an `impl MemoryStore`: `runs.rs` (events, the end, leases, creation, threads, status,
//! cancels, children), `conversations.rs`, `approvals.rs`; `queues.rs` and `usage.rs` hold the request
//! queues and the token counts the store keeps.

mod approvals;
mod conversations;
pub(super) mod queues;
mod runs;
pub(super) mod usage;

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::run::message::Message;
use crate::run::{Envelope, RunRecord, RunResult, StoredEvent};

/// How much of what has ended the in-process store keeps. What is forgotten answers as a run or thread
/// that never existed (404 for a run, an empty history for a thread).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// The most runs that have ended kept at once; the earliest ended go first (`--keep-finished-runs`).
    pub finished_runs: usize,
    /// How long a run that has ended is kept (Redis keeps its events this long:
    /// [`super::keys::EVENTS_TTL_SECONDS`]).
    pub finished_run_ttl: Duration,
    /// The most threads kept for one user (their owner); that user's least recently written go first
    /// (`--keep-threads`). Another user's threads never count.
    pub threads: usize,
    /// How long a thread nobody writes is kept (as in Redis: [`super::keys::STATE_TTL_SECONDS`]).
    pub thread_ttl: Duration,
}

impl Default for Retention {
    /// 1,000 runs that have ended, for two hours; 1,000 threads per user, for 30 days.
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
    usage: usage::MemoryUsage,
}

#[derive(Default)]
struct MemoryState {
    retention: Retention,
    /// The runs that have ended, earliest first, with when they ended.
    ended: VecDeque<(Instant, String)>,
    /// When each thread was last written, by a counter that orders writes, and the owner it is
    /// counted for (`""` for none).
    thread_writes: HashMap<String, (u64, Instant, String)>,
    /// How many threads of `thread_writes` each user owns (threads without an owner under `""`).
    threads_per_owner: HashMap<String, usize>,
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
    /// Warm pods' claims, by pod uid ([`super::claims`]).
    claims: HashMap<String, String>,
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
    queues: queues::Queues,
    /// The threads' conversations, forgotten with their threads.
    conversations: HashMap<String, crate::run::conversation::Conversation>,
    /// The runs whose question is in their thread ([`super::Store::put_run_input`]).
    inputs_stored: HashSet<String>,
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
    pub(super) fn usage(&self) -> &usage::MemoryUsage {
        &self.usage
    }

    pub(super) fn watch(&self, run_id: &str) -> super::notices::RunWatch {
        self.notices.watch(run_id)
    }

    /// `f` on the request queues, under the store's lock.
    pub(super) fn lock_queues<T>(&self, f: impl FnOnce(&mut queues::Queues) -> T) -> T {
        f(&mut self.state().queues)
    }
}

impl MemoryState {
    /// Notes that the run has just ended, and forgets what that pushes out.
    fn ended_now(&mut self, run_id: &str) {
        let now = Instant::now();
        self.ended.push_back((now, run_id.to_string()));
        self.forget(now);
    }

    /// Notes a write of the thread, and forgets what that pushes out: threads whose time is up, and the
    /// least recently written of its owner's when the owner has more than the retention allows.
    fn touch_thread(&mut self, thread_id: &str) {
        let now = Instant::now();
        self.writes += 1;
        let owner = self.owner_of(thread_id);
        let previous = self.thread_writes.insert(thread_id.to_string(), (self.writes, now, owner.clone()));
        match previous {
            Some((_, _, counted)) if counted == owner => {}
            // New, or given its owner since it was counted.
            previous => {
                if let Some((_, _, counted)) = previous {
                    self.uncount(&counted);
                }
                *self.threads_per_owner.entry(owner.clone()).or_default() += 1;
            }
        }
        self.thread_order.push_back((self.writes, thread_id.to_string()));
        // Stale entries (threads written again since) are dropped when they outnumber the threads.
        if self.thread_order.len() > 2 * self.thread_writes.len() + 64 {
            let writes = &self.thread_writes;
            self.thread_order.retain(|(at, thread)| writes.get(thread).is_some_and(|(last, _, _)| last == at));
        }
        self.forget(now);
        self.forget_over_count(&owner);
    }

    /// Takes one thread off `owner`'s count.
    fn uncount(&mut self, owner: &str) {
        if let Some(count) = self.threads_per_owner.get_mut(owner) {
            *count -= 1;
            if *count == 0 {
                self.threads_per_owner.remove(owner);
            }
        }
    }

    /// The user who owns the thread (`""` for none).
    fn owner_of(&self, thread_id: &str) -> String {
        self.thread_owners.get(thread_id).cloned().unwrap_or_default()
    }

    /// Whether a run that has not ended holds the thread.
    fn thread_held(&self, thread_id: &str) -> bool {
        self.thread_locks
            .get(thread_id)
            .is_some_and(|run| self.records.get(run).is_some_and(|r| !r.status.is_terminal()))
    }

    /// Forgets the runs that ended and the threads whose time is up at `now`.
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
            let Some(&(last, written, _)) = self.thread_writes.get(&thread_id) else {
                self.thread_order.pop_front();
                continue;
            };
            if last != at {
                self.thread_order.pop_front();
                continue;
            }
            if now.saturating_duration_since(written) < retention.thread_ttl {
                break;
            }
            self.thread_order.pop_front();
            // A thread a run holds stays, whatever its age.
            if self.thread_held(&thread_id) {
                spared.push((at, thread_id));
                continue;
            }
            self.forget_thread(&thread_id);
        }
        for entry in spared.into_iter().rev() {
            self.thread_order.push_front(entry);
        }
    }

    /// Forgets `owner`'s least recently written threads (never one a run holds) while the owner has more
    /// than the retention allows. A scan of the threads, done only when one too many was written.
    fn forget_over_count(&mut self, owner: &str) {
        while self.threads_per_owner.get(owner).is_some_and(|&count| count > self.retention.threads) {
            let oldest = self
                .thread_writes
                .iter()
                .filter(|(thread, (_, _, counted))| counted == owner && !self.thread_held(thread))
                .min_by_key(|(_, (at, _, _))| *at)
                .map(|(thread, _)| thread.clone());
            let Some(thread_id) = oldest else { break };
            self.forget_thread(&thread_id);
        }
    }

    /// Forgets everything of one thread (its entry in the write order goes stale).
    fn forget_thread(&mut self, thread_id: &str) {
        if let Some((_, _, counted)) = self.thread_writes.remove(thread_id) {
            self.uncount(&counted);
        }
        self.threads.remove(thread_id);
        self.thread_owners.remove(thread_id);
        self.thread_locks.remove(thread_id);
        self.conversations.remove(thread_id);
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
        self.inputs_stored.remove(run_id);
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

impl MemoryStore {
    /// Puts the claim of pod `pod_uid`, in place of any before it.
    pub(super) fn offer_claim(&self, pod_uid: &str, claim: &str) {
        self.state().claims.insert(pod_uid.to_string(), claim.to_string());
    }

    /// Takes the claim of pod `pod_uid`, if there is one.
    pub(super) fn take_claim(&self, pod_uid: &str) -> Option<String> {
        self.state().claims.remove(pod_uid)
    }
}
