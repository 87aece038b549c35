//! Finding runs: a caller's runs (a superadmin's: everyone's) filtered by agent, kind, status, time and
//! text, newest first, a page at a time ([`find`]), over the store's list of runs
//! ([`crate::store::Store::listed_runs`]).

use crate::access::{Identity, Role};
use crate::facade::http::error::ApiError;
use crate::run::{RunRecord, RunStatus};
use crate::store::Store;
use crate::store::run_list::RunCursor;

/// The most runs one search reads from the list before it answers with what it found and a cursor to
/// go on from: a search for something rare answers in bounded time.
pub const MAX_SCANNED: usize = 2000;

/// How many runs the list is read by at a time.
const BATCH: usize = 200;

/// What a run must be to be found. Every field set must hold.
#[derive(Clone, Debug, Default)]
pub struct RunFilter {
    /// Its agent's slug.
    pub agent_slug: Option<String>,
    /// Its thread.
    pub thread_id: Option<String>,
    /// `Some(true)`: only subagent runs; `Some(false)`: only runs a user started.
    pub subagent: Option<bool>,
    /// One of these statuses (any when empty).
    pub statuses: Vec<RunStatus>,
    /// Created at or after, in milliseconds since the epoch.
    pub since_ms: Option<i64>,
    /// Created before, in milliseconds since the epoch.
    pub until_ms: Option<i64>,
    /// Lowercase words that must each appear in its id, thread, agent, input summary or error.
    pub words: Vec<String>,
}

impl RunFilter {
    /// Whether `record` is what the filter asks for (its time is checked by the list's order).
    pub fn admits(&self, record: &RunRecord) -> bool {
        if self.agent_slug.as_deref().is_some_and(|slug| slug != record.agent_slug) {
            return false;
        }
        if self.thread_id.as_deref().is_some_and(|thread| thread != record.thread_id) {
            return false;
        }
        if self.subagent.is_some_and(|subagent| subagent != record.parent.is_some()) {
            return false;
        }
        if !self.statuses.is_empty() && !self.statuses.contains(&record.status) {
            return false;
        }
        if self.words.is_empty() {
            return true;
        }
        let haystack = [
            record.run_id.as_str(),
            record.thread_id.as_str(),
            record.agent_slug.as_str(),
            record.request.summary.as_deref().unwrap_or_default(),
            record.error.as_deref().unwrap_or_default(),
        ]
        .join("\n")
        .to_lowercase();
        self.words.iter().all(|word| haystack.contains(word))
    }
}

/// Whose runs a search reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whose {
    /// The caller's own.
    Mine,
    /// Everyone's: a superadmin's alone.
    Everyone,
}

/// A page of runs found.
#[derive(Debug)]
pub struct Found {
    /// The runs, newest first.
    pub runs: Vec<RunRecord>,
    /// Where the next page starts; `None` at the end of the list.
    pub next: Option<RunCursor>,
}

/// At most `limit` runs `filter` admits, of `whose`, newest first, after `after`. Reads at most
/// [`MAX_SCANNED`] runs of the list; when it stops there, `next` says where to go on. Errors: 403 naming
/// `scope` when someone other than a superadmin asks for everyone's.
pub async fn find(
    store: &Store,
    who: &Identity,
    whose: Whose,
    filter: &RunFilter,
    after: Option<RunCursor>,
    limit: usize,
) -> Result<Found, ApiError> {
    let uid = match whose {
        Whose::Mine => Some(who.uid.as_str()),
        Whose::Everyone if who.role == Role::Superadmin => None,
        Whose::Everyone => return Err(ApiError::Forbidden("scope: only a superadmin lists everyone's runs".into())),
    };
    // A run created at `until` or later is not wanted: start just below it.
    let below_until = filter.until_ms.map(|until| RunCursor { created_ms: until, run_id: String::new() });
    let mut cursor = match (after, below_until) {
        (Some(after), Some(until)) => Some(after.min(until)),
        (after, until) => after.or(until),
    };
    let mut runs = Vec::new();
    let mut scanned = 0;
    loop {
        let batch = store.listed_runs(uid, cursor.as_ref(), BATCH).await?;
        let ended = batch.len() < BATCH;
        for (place, record) in batch {
            if filter.since_ms.is_some_and(|since| place.created_ms < since) {
                return Ok(Found { runs, next: None });
            }
            scanned += 1;
            cursor = Some(place);
            if let Some(record) = record.filter(|r| filter.admits(r)) {
                runs.push(record);
                if runs.len() == limit {
                    return Ok(Found { runs, next: cursor });
                }
            }
        }
        if ended {
            return Ok(Found { runs, next: None });
        }
        if scanned >= MAX_SCANNED {
            return Ok(Found { runs, next: cursor });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::Identity;
    use crate::resources::ParentRef;
    use crate::run::{RunLimits, RunRequest};
    use crate::store::Retention;

    fn record(uid: &str, n: usize, agent: &str, status: RunStatus) -> RunRecord {
        let who = Identity::new(uid, Role::User, None);
        let mut record = RunRecord::started_by(
            &who,
            format!("run{n:05}"),
            format!("thread{n:05}"),
            agent.into(),
            RunRequest::default().summarized(&format!("question number {n} about Rust")),
            None,
        );
        record.created_at = jiff::Timestamp::from_second(1_800_000_000 + n as i64).unwrap().to_string();
        record.status = status;
        record
    }

    async fn store_with(records: &[RunRecord]) -> Store {
        let store = Store::memory_with(Retention { finished_runs: 10_000, ..Retention::default() });
        let limits = RunLimits { per_user: 10_000, total: 10_000 };
        for record in records {
            store.create_run(record, None, limits).await.unwrap();
            if record.status.is_terminal() {
                store.end_run(&record.run_id, record.status, None).await.unwrap();
            }
        }
        store
    }

    #[tokio::test]
    async fn a_user_finds_only_their_own_runs_newest_first_and_pages_through_them_without_loss() {
        let mut records: Vec<RunRecord> = (0..7).map(|n| record("alice", n, "helper", RunStatus::Completed)).collect();
        records.push(record("bob", 100, "helper", RunStatus::Completed));
        let store = store_with(&records).await;
        let alice = Identity::new("alice", Role::User, None);
        let mut seen = Vec::new();
        let mut after = None;
        loop {
            let page = find(&store, &alice, Whose::Mine, &RunFilter::default(), after, 3).await.unwrap();
            seen.extend(page.runs.iter().map(|r| r.run_id.clone()));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let expected: Vec<String> = (0..7).rev().map(|n| format!("run{n:05}")).collect();
        assert_eq!(seen, expected);
    }

    #[tokio::test]
    async fn filters_by_agent_kind_status_time_and_words_together() {
        let mut child = record("alice", 3, "explorer", RunStatus::Failed);
        child.parent =
            Some(ParentRef { run_id: "run00002".into(), thread_id: "thread00002".into(), ..ParentRef::default() });
        child.error = Some("model quota exhausted".into());
        let records = vec![
            record("alice", 1, "helper", RunStatus::Completed),
            record("alice", 2, "helper", RunStatus::Failed),
            child,
            record("alice", 4, "explorer", RunStatus::Failed),
        ];
        let store = store_with(&records).await;
        let alice = Identity::new("alice", Role::User, None);
        let ids = |found: Found| found.runs.into_iter().map(|r| r.run_id).collect::<Vec<_>>();
        let failed = RunFilter { statuses: vec![RunStatus::Failed], ..RunFilter::default() };
        assert_eq!(
            ids(find(&store, &alice, Whose::Mine, &failed, None, 50).await.unwrap()),
            ["run00004", "run00003", "run00002"]
        );
        let failed_children = RunFilter { subagent: Some(true), ..failed.clone() };
        assert_eq!(ids(find(&store, &alice, Whose::Mine, &failed_children, None, 50).await.unwrap()), ["run00003"]);
        let quota = RunFilter { words: vec!["quota".into(), "explorer".into()], ..RunFilter::default() };
        assert_eq!(ids(find(&store, &alice, Whose::Mine, &quota, None, 50).await.unwrap()), ["run00003"]);
        let question = RunFilter { words: vec!["number 2".into()], ..RunFilter::default() };
        assert_eq!(ids(find(&store, &alice, Whose::Mine, &question, None, 50).await.unwrap()), ["run00002"]);
        let window = RunFilter {
            agent_slug: Some("helper".into()),
            thread_id: Some("thread00002".into()),
            since_ms: Some(1_800_000_002_000),
            until_ms: Some(1_800_000_003_000),
            ..RunFilter::default()
        };
        assert_eq!(ids(find(&store, &alice, Whose::Mine, &window, None, 50).await.unwrap()), ["run00002"]);
    }

    #[tokio::test]
    async fn everyone_s_runs_are_a_superadmin_s_alone() {
        let store = store_with(&[
            record("alice", 1, "helper", RunStatus::Completed),
            record("bob", 2, "helper", RunStatus::Completed),
        ])
        .await;
        let refused =
            find(&store, &Identity::new("alice", Role::User, None), Whose::Everyone, &RunFilter::default(), None, 50)
                .await;
        assert!(matches!(refused, Err(ApiError::Forbidden(ref m)) if m.starts_with("scope")), "{refused:?}");
        let root = Identity::new("root", Role::Superadmin, None);
        let all = find(&store, &root, Whose::Everyone, &RunFilter::default(), None, 50).await.unwrap();
        assert_eq!(all.runs.len(), 2);
    }

    #[tokio::test]
    async fn a_rare_match_answers_after_a_bounded_scan_with_a_cursor_to_go_on() {
        let records: Vec<RunRecord> =
            (0..MAX_SCANNED + 10).map(|n| record("alice", n, "helper", RunStatus::Completed)).collect();
        let store = store_with(&records).await;
        let alice = Identity::new("alice", Role::User, None);
        let rare = RunFilter { words: vec!["number 3 ".into()], ..RunFilter::default() };
        let first = find(&store, &alice, Whose::Mine, &rare, None, 50).await.unwrap();
        assert!(first.runs.is_empty());
        let next = first.next.expect("a cursor to go on from");
        let second = find(&store, &alice, Whose::Mine, &rare, Some(next), 50).await.unwrap();
        assert_eq!(second.runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>(), ["run00003"]);
        assert!(second.next.is_none());
    }
}
