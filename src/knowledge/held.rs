//! A large value held only while it is used ([`HeldWhileUsed`]): loaded by the first caller that asks,
//! shared by all who ask while it is held, and dropped when nobody has asked for [`HeldWhileUsed::idle`].
//!
//! The word dictionary is such a value: about 40 MiB in memory, a sixth of a second to load, and used
//! only while documents are indexed or a question is searched. A process at rest should not carry it.
//!
//! The value is loaded, and later dropped, on a thread of its own: an allocator that keeps memory per
//! thread (mimalloc) frees it where it was allocated, so [`on_release`]'s hook (the binary's: return
//! freed pages to the system) finds it free.

use std::sync::mpsc::sync_channel;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

/// What runs after a held value is dropped, on the thread that dropped it.
static ON_RELEASE: OnceLock<fn()> = OnceLock::new();

/// Sets what runs after a held value is dropped (once per process; later calls are ignored): the
/// binary asks its allocator to return freed pages to the system.
pub fn on_release(hook: fn()) {
    let _ = ON_RELEASE.set(hook);
}

/// A value of type `T` loaded by `load` when first asked for and dropped `idle` after it was last asked
/// for (checked a few times per `idle`, so it goes between `idle` and `1.25 × idle` after).
pub struct HeldWhileUsed<T: Send + Sync + 'static> {
    load: fn() -> T,
    idle: Duration,
    held: Mutex<Option<Held<T>>>,
}

struct Held<T> {
    value: Arc<T>,
    last_used: Instant,
}

impl<T: Send + Sync + 'static> HeldWhileUsed<T> {
    /// Nothing held until the first [`get`](Self::get).
    pub const fn new(load: fn() -> T, idle: Duration) -> Self {
        Self { load, idle, held: Mutex::new(None) }
    }

    /// How long the value stays held after it was last asked for.
    pub fn idle(&self) -> Duration {
        self.idle
    }

    /// Whether the value is held now.
    pub fn is_held(&self) -> bool {
        self.lock().is_some()
    }

    /// The value, loaded first if it is not held (the caller waits for the load; callers that ask
    /// meanwhile wait for the same load). A caller keeps it for as long as it holds the `Arc`, even past
    /// the idle time; it should let go once done.
    pub fn get(&'static self) -> Arc<T> {
        let mut held = self.lock();
        if let Some(held) = held.as_mut() {
            held.last_used = Instant::now();
            return Arc::clone(&held.value);
        }
        let (sender, receiver) = sync_channel(1);
        let spawned = std::thread::Builder::new().name("held-value".into()).spawn(move || {
            let value = Arc::new((self.load)());
            if sender.send(Arc::clone(&value)).is_ok() {
                self.release_when_idle(value);
            }
        });
        match spawned.ok().and_then(|_| receiver.recv().ok()) {
            Some(value) => {
                *held = Some(Held { value: Arc::clone(&value), last_used: Instant::now() });
                value
            }
            // No thread to load and release it (none could be made, or the load panicked there): loaded
            // here for this caller alone and not held, so nothing stays without a thread to drop it.
            None => Arc::new((self.load)()),
        }
    }

    /// On the loading thread: waits until the value has gone unasked for `idle`, stops holding it, waits
    /// for its last other user to let go, drops it, then runs the release hook.
    fn release_when_idle(&self, value: Arc<T>) {
        let tick = self.idle / 4;
        loop {
            std::thread::sleep(tick);
            let mut held = self.lock();
            let current = held.as_ref().is_some_and(|h| Arc::ptr_eq(&h.value, &value));
            if current && held.as_ref().is_some_and(|h| h.last_used.elapsed() < self.idle) {
                continue;
            }
            if current {
                *held = None;
            }
            break;
        }
        while Arc::strong_count(&value) > 1 {
            std::thread::sleep(tick.min(Duration::from_millis(50)));
        }
        drop(value);
        if let Some(hook) = ON_RELEASE.get() {
            hook();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<Held<T>>> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// A value that counts its drops in the static it is given.
    struct Counted(&'static AtomicUsize);

    /// The names of the threads [`Counted`] values were dropped on.
    static DROPPED_ON: Mutex<Vec<String>> = Mutex::new(Vec::new());

    impl Drop for Counted {
        fn drop(&mut self) {
            let thread = std::thread::current().name().unwrap_or_default().to_string();
            DROPPED_ON.lock().unwrap_or_else(PoisonError::into_inner).push(thread);
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// Every [`Counted`] value dropped so far was dropped on the thread that loaded it.
    fn assert_dropped_on_loading_threads() {
        let dropped_on = DROPPED_ON.lock().unwrap_or_else(PoisonError::into_inner).clone();
        assert!(dropped_on.iter().all(|t| t == "held-value"), "dropped on the thread that loaded it: {dropped_on:?}");
    }

    fn wait_until(what: impl Fn() -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if what() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }

    static SHARED_LOADS: AtomicUsize = AtomicUsize::new(0);
    static SHARED_DROPS: AtomicUsize = AtomicUsize::new(0);
    fn shared_load() -> Counted {
        SHARED_LOADS.fetch_add(1, Ordering::SeqCst);
        Counted(&SHARED_DROPS)
    }
    static SHARED: HeldWhileUsed<Counted> = HeldWhileUsed::new(shared_load, Duration::from_secs(3));

    #[test]
    fn callers_share_one_load_which_is_dropped_when_idle_and_loaded_again_when_asked() {
        let first = SHARED.get();
        let second = SHARED.get();
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(SHARED_LOADS.load(Ordering::SeqCst), 1);
        drop((first, second));
        assert!(SHARED.is_held());
        assert!(wait_until(|| SHARED_DROPS.load(Ordering::SeqCst) == 1), "dropped after the idle time");
        assert!(!SHARED.is_held());
        assert_dropped_on_loading_threads();
        let again = SHARED.get();
        assert_eq!(SHARED_LOADS.load(Ordering::SeqCst), 2);
        assert!(SHARED.is_held());
        drop(again);
    }

    static KEPT_DROPS: AtomicUsize = AtomicUsize::new(0);
    fn kept_load() -> Counted {
        Counted(&KEPT_DROPS)
    }
    static KEPT: HeldWhileUsed<Counted> = HeldWhileUsed::new(kept_load, Duration::from_millis(100));

    #[test]
    fn a_value_still_in_use_is_dropped_only_when_its_user_lets_go() {
        let user = KEPT.get();
        assert!(wait_until(|| !KEPT.is_held()), "no longer held once idle");
        std::thread::sleep(KEPT.idle() * 2);
        assert_eq!(KEPT_DROPS.load(Ordering::SeqCst), 0, "not dropped under its user");
        drop(user);
        // The last user let go on this thread; the loading thread, which waited for it, drops it.
        assert!(wait_until(|| KEPT_DROPS.load(Ordering::SeqCst) == 1));
        assert_dropped_on_loading_threads();
    }

    static ASKED_DROPS: AtomicUsize = AtomicUsize::new(0);
    fn asked_load() -> Counted {
        Counted(&ASKED_DROPS)
    }
    static ASKED: HeldWhileUsed<Counted> = HeldWhileUsed::new(asked_load, Duration::from_secs(2));

    #[test]
    fn a_value_asked_for_within_its_idle_time_stays() {
        let start = Instant::now();
        while start.elapsed() < ASKED.idle() * 2 {
            drop(ASKED.get());
            std::thread::sleep(ASKED.idle() / 20);
        }
        assert_eq!(ASKED_DROPS.load(Ordering::SeqCst), 0);
        assert!(ASKED.is_held());
    }
}
