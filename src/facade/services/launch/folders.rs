//! The folders runs leave under the local mode's data folder, removed when what they belong to is gone:
//! a runner subprocess's `runs/<run_id>` as soon as it exits ([`super::local`]), and a thread's skills
//! scope (`users/<uid>/skills/<thread_id>`, the projection of its agent's skills, made again at each of
//! its runs) once the store has forgotten the thread (its owner's time to live in Redis, the retention
//! of the in-process store). A user's workspace and a conversation's uploads and outputs are the user's
//! files and stay.

use std::path::Path;

use super::local::LocalLauncher;
use crate::run::scope::{Scope, ScopeIds};
use crate::store::{Store, StoreError};

/// Removes the skills scopes of threads the store no longer knows and no run of this process is on;
/// returns how many it removed. A folder that cannot be removed is logged and left for the next time.
/// The removals go [`BATCH`] at a time with a pause between two batches that spreads them over `over`
/// (at most [`MAX_PAUSE`]; a pass with few folders ends sooner): thousands of folders removed at once
/// held a core and left the file system slow to make the next runs' folders, so runs stalled behind
/// every pass (a p99 of a second at 50 runs in flight, docs/benchmarks.md). The pauses are the async
/// task's, so a process that stops waits for one batch at most.
///
/// Errors: the store fails ([`StoreError`]); nothing is removed then.
pub async fn tidy(launcher: &LocalLauncher, store: &Store, over: std::time::Duration) -> Result<usize, StoreError> {
    let data_dir = launcher.data_dir.clone();
    let scopes = tokio::task::spawn_blocking(move || skills_scopes(&data_dir)).await.unwrap_or_default();
    let mut forgotten = Vec::new();
    let mut looks = 0usize;
    for (uid, threads) in scopes {
        for thread_id in threads {
            // The in-process store answers at once: without a yield, thousands of looks would hold this
            // worker, and the runs queued on it, until the last.
            looks += 1;
            if looks.is_multiple_of(256) {
                tokio::task::yield_now().await;
            }
            if store.thread_owner(&thread_id).await?.is_none() {
                forgotten.push((uid.clone(), thread_id));
            }
        }
    }
    let batches = forgotten.len().div_ceil(BATCH).max(1);
    let pause = over.checked_div(batches as u32).unwrap_or_default().min(MAX_PAUSE);
    let mut removed = 0;
    let mut forgotten = forgotten.into_iter().peekable();
    while forgotten.peek().is_some() {
        let batch: Vec<(String, String)> = forgotten.by_ref().take(BATCH).collect();
        let (data_dir, runs) = (launcher.data_dir.clone(), launcher.runs.clone());
        removed += tokio::task::spawn_blocking(move || remove_scopes(&data_dir, &runs, batch)).await.unwrap_or(0);
        if forgotten.peek().is_some() {
            tokio::time::sleep(pause).await;
        }
    }
    Ok(removed)
}

/// How many skills scopes [`tidy`] removes in one go on a blocking thread.
pub const BATCH: usize = 32;

/// The longest pause between two batches of a pass of [`tidy`].
pub const MAX_PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// Removes the skills scopes of `forgotten` (uid, thread) one folder at a time, each while no run is
/// taken on, so a run taken on after the look makes its folders after the removal, never before it,
/// and a launch waits for one folder's removal at most; a thread a run is on now is skipped. Returns how
/// many it removed. File-system work: call it on a blocking thread.
fn remove_scopes(data_dir: &Path, runs: &super::local::LocalRuns, forgotten: Vec<(String, String)>) -> usize {
    let mut removed = 0;
    for (uid, thread_id) in forgotten {
        let Ok(ids) = ScopeIds::new(&uid, "thread_id", &thread_id, None) else { continue };
        let path = data_dir.join(ids.sub_path(Scope::Skills));
        runs.with_threads_taken(|taken| {
            if taken.contains(thread_id.as_str()) {
                return;
            }
            match std::fs::remove_dir_all(&path) {
                Ok(()) => removed += 1,
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => tracing::warn!(path = %path.display(), error = %err, "cannot remove a skills scope"),
            }
        });
    }
    removed
}

/// Each user folder's skills scopes: the uid and the thread ids, names that are valid ids only.
fn skills_scopes(data_dir: &Path) -> Vec<(String, Vec<String>)> {
    let names = |dir: &Path| -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
        entries
            .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
            .filter(|name| crate::run::thread_id::is_valid_id(name))
            .collect()
    };
    names(&data_dir.join("users"))
        .into_iter()
        .filter_map(|uid| {
            let scope = ScopeIds::new(&uid, "thread_id", "x", None).ok()?.sub_path(Scope::Skills);
            let parent = data_dir.join(scope).parent()?.to_path_buf();
            Some((uid, names(&parent)))
        })
        .collect()
}

/// Removes forgotten threads' skills scopes `every` after the last pass ended, each pass spread over
/// at most half of `every`, for as long as the process lives.
pub fn spawn_tidier(launcher: LocalLauncher, store: Store, every: std::time::Duration) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(every).await;
            match tidy(&launcher, &store, every / 2).await {
                Ok(0) => {}
                Ok(removed) => tracing::debug!(removed, "removed the skills scopes of forgotten threads"),
                Err(err) => tracing::warn!(error = %err, "cannot look for forgotten threads' folders"),
            }
        }
    })
}
