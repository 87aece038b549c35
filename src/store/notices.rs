//! Pushed notices of a run's changes: whoever waits for a run (`task`, `subagent_await`, an event
//! stream) is woken as soon as the run writes an event, ends, or is asked to stop, instead of looking
//! again on a timer.
//!
//! Each process keeps one [`Notices`] registry: a [`Notify`] per watched run, held weakly, so a run
//! nobody watches costs nothing. The in-process store wakes it on every write; with Redis, every write
//! also publishes on the run's notice channel ([`super::keys::run_notice`]), and one pattern
//! subscription per process ([`super::redis`]) turns each message into a wake-up here. A notice can
//! still be missed (a subscription that broke and is being made again), so waiters look again after
//! [`RunWatch::SAFETY_NET`] at the latest.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::Notify;

/// The registry of watched runs of one process. Clones share it.
#[derive(Clone, Default)]
pub struct Notices(Arc<Mutex<HashMap<String, Weak<Notify>>>>);

/// Past this many entries, those of runs nobody watches any more are dropped when a watch is added.
const PRUNE_AT: usize = 1024;

impl Notices {
    /// A watch of `run_id`, sharing one notice with every other watch of the run in this process.
    pub fn watch(&self, run_id: &str) -> RunWatch {
        let mut runs = self.0.lock().expect("notices lock");
        if let Some(notify) = runs.get(run_id).and_then(Weak::upgrade) {
            return RunWatch(notify);
        }
        if runs.len() >= PRUNE_AT {
            runs.retain(|_, weak| weak.strong_count() > 0);
        }
        let notify = Arc::new(Notify::new());
        runs.insert(run_id.to_string(), Arc::downgrade(&notify));
        RunWatch(notify)
    }

    /// Wakes every watch of `run_id` that is waiting; a run nobody watches costs a map lookup.
    pub fn wake(&self, run_id: &str) {
        let notify = self.0.lock().expect("notices lock").get(run_id).and_then(Weak::upgrade);
        if let Some(notify) = notify {
            notify.notify_waiters();
        }
    }

    /// Wakes every watch of every run: after a subscription broke, when notices may have been missed.
    pub fn wake_all(&self) {
        let all: Vec<Arc<Notify>> = self.0.lock().expect("notices lock").values().filter_map(Weak::upgrade).collect();
        for notify in all {
            notify.notify_waiters();
        }
    }

    /// How many runs have an entry (watched, or not yet pruned).
    pub fn len(&self) -> usize {
        self.0.lock().expect("notices lock").len()
    }

    /// Whether no run has an entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A watch of one run. Take [`RunWatch::changed`] *before* looking at the run, then await it: a change
/// made after it was taken is never missed.
pub struct RunWatch(Arc<Notify>);

impl RunWatch {
    /// The longest a waiter goes without looking at the run again, notice or not.
    pub const SAFETY_NET: Duration = Duration::from_secs(1);

    /// Resolves at the run's next change after this call, or after `at_most` (capped at
    /// [`RunWatch::SAFETY_NET`]), whichever comes first.
    pub fn changed(&self, at_most: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let notice = self.next_notice();
        let wait = at_most.min(Self::SAFETY_NET);
        Box::pin(async move {
            let _ = tokio::time::timeout(wait, notice).await;
        })
    }

    /// Resolves at the run's next notice after this call, and only then (no safety net): what
    /// [`RunWatch::changed`] is built on.
    pub fn next_notice(&self) -> Pin<Box<dyn Future<Output = ()> + Send>> {
        let mut notified = Box::pin(self.0.clone().notified_owned());
        notified.as_mut().enable();
        notified
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_change_after_the_watch_was_taken_wakes_it_at_once() {
        let notices = Notices::default();
        let watch = notices.watch("run-1");
        let changed = watch.changed(Duration::from_secs(30));
        notices.wake("run-1");
        let started = std::time::Instant::now();
        changed.await;
        assert!(started.elapsed() < RunWatch::SAFETY_NET / 2, "woken by the notice, not the safety net");
    }

    #[tokio::test]
    async fn another_runs_change_does_not_wake_it() {
        let notices = Notices::default();
        let watch = notices.watch("run-1");
        let changed = watch.changed(Duration::from_millis(200));
        notices.wake("run-2");
        let started = std::time::Instant::now();
        changed.await;
        assert!(started.elapsed() >= Duration::from_millis(200), "only its own run wakes it");
    }

    #[test]
    fn runs_nobody_watches_are_pruned() {
        let notices = Notices::default();
        for n in 0..PRUNE_AT + 10 {
            drop(notices.watch(&format!("run-{n}")));
        }
        let _kept = notices.watch("kept");
        assert!(notices.len() < PRUNE_AT, "{}", notices.len());
    }
}
