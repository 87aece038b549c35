//! Reading a run tree: a run and every run it started, and theirs, and their events behind one tree
//! cursor ([`crate::delegation::tree`]). Used by the tree event stream
//! (`GET /api/agent/runs/{id}/events?tree=true`) and by `subagent_events` with `tree: true`.
//!
//! The tree is found from the store's children sets, breadth first, each run's children by creation
//! time, at most [`MAX_TREE_RUNS`] runs; a run of another user is never part of it (a run's children
//! are its user's by construction; the check keeps it so). Events are read run by run in that order,
//! each after its own position in the cursor, so a page never repeats an event nor skips one, whatever
//! order the runs write in.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::delegation::tree::{MAX_TREE_RUNS, TreeCursor};
use crate::run::{RunRecord, StoredEvent};
use crate::store::{Store, StoreError};

/// One event of a tree, with the run it belongs to.
#[derive(Clone, Debug)]
pub struct TreeEvent {
    /// The event.
    pub event: StoredEvent,
    /// The run that started its run (`None` for the tree's root).
    pub parent_run_id: Option<String>,
    /// The parent's tool call that started its run.
    pub parent_tool_call_id: Option<String>,
    /// The tree cursor after this event.
    pub cursor: String,
}

/// The runs of the tree rooted at `root`, root first, breadth first, children by creation time; those
/// of `uid` only, at most [`MAX_TREE_RUNS`]. Errors: the store fails.
pub async fn tree_runs(store: &Store, root: RunRecord, uid: &str) -> Result<Vec<RunRecord>, StoreError> {
    let mut runs = vec![root];
    let mut next = 0;
    while next < runs.len() && runs.len() < MAX_TREE_RUNS {
        let parent = runs[next].run_id.clone();
        next += 1;
        let mut children = Vec::new();
        for child in store.children(&parent).await? {
            if let Some(record) = store.run_record(&child).await?
                && record.uid == uid
                && !runs.iter().any(|r| r.run_id == record.run_id)
            {
                children.push(record);
            }
        }
        children.sort_by(|a, b| a.created_at.cmp(&b.created_at).then_with(|| a.run_id.cmp(&b.run_id)));
        let room = MAX_TREE_RUNS - runs.len();
        runs.extend(children.into_iter().take(room));
    }
    Ok(runs)
}

/// Up to `limit` events of `runs` after `cursor`, run by run in the order of `runs`, each with the
/// cursor after it; `cursor` is moved past them. Errors: the store fails (nothing is moved then).
pub async fn read_page(
    store: &Store,
    runs: &[RunRecord],
    cursor: &mut TreeCursor,
    limit: usize,
) -> Result<Vec<TreeEvent>, StoreError> {
    let mut moved = cursor.clone();
    let mut page = Vec::new();
    for run in runs {
        if page.len() >= limit {
            break;
        }
        let events = store.read_events(&run.run_id, moved.position(&run.run_id), limit - page.len()).await?;
        for event in events {
            moved.advance(&run.run_id, &event.seq);
            page.push(TreeEvent {
                parent_run_id: run.parent.as_ref().map(|p| p.run_id.clone()),
                parent_tool_call_id: run.parent.as_ref().and_then(|p| p.tool_call_id.clone()),
                cursor: moved.encode(),
                event,
            });
        }
    }
    *cursor = moved;
    Ok(page)
}

/// Whether every run of `runs` has ended (their records as read now) and nothing of theirs is left
/// after `cursor`: then the tree will write nothing more (only a running run starts children).
pub async fn drained(store: &Store, runs: &[RunRecord], cursor: &TreeCursor) -> Result<bool, StoreError> {
    for run in runs {
        let ended = store.run_record(&run.run_id).await?.is_none_or(|r| r.status.is_terminal());
        if !ended || !store.read_events(&run.run_id, cursor.position(&run.run_id), 1).await?.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Resolves when any run of `runs` writes, ends or starts a child (the store's pushed notices), or
/// after `at_most`.
pub fn any_changed(store: &Store, runs: &[RunRecord], at_most: Duration) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    let watches: Vec<_> = runs.iter().map(|r| store.watch(&r.run_id)).collect();
    let waits: Vec<_> = watches.iter().map(|w| w.changed(at_most)).collect();
    Box::pin(async move {
        let _watches = watches;
        futures::future::select_all(waits).await;
    })
}
