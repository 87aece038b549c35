//! The list of runs, for [`Store`]: each user's runs and everyone's, newest first, in pages. Redis keeps
//! them in sorted sets written by the run's creation ([`keys::user_runs`], [`keys::ALL_RUNS`]), bounded
//! and expiring; the in-process store reads its records, which its [`super::Retention`] bounds.

use crate::run::RunRecord;
use crate::store::types::StoreError;
use crate::store::{RedisStore, Store, keys};

/// A place in the list of runs: the run `run_id`, created at `created_ms` (milliseconds since the
/// epoch). The list orders runs by `(created_ms, run_id)`, newest (greatest) first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RunCursor {
    /// When the run was created, in milliseconds since the epoch.
    pub created_ms: i64,
    /// The run id.
    pub run_id: String,
}

/// A run as the list holds it: its place, and its record (`None` once the record has expired while the
/// list still names it).
pub type ListedRun = (RunCursor, Option<RunRecord>);

/// When `record` was created, in milliseconds since the epoch (0 for a time that does not parse).
pub fn created_ms(record: &RunRecord) -> i64 {
    record.created_at.parse::<jiff::Timestamp>().map_or(0, |t| t.as_millisecond())
}

impl Store {
    /// At most `count` runs of `uid` (of everyone for `None`), newest first, strictly after `after` in
    /// that order (from the newest for `None`). Fewer than `count` only at the end of the list.
    pub async fn listed_runs(
        &self,
        uid: Option<&str>,
        after: Option<&RunCursor>,
        count: usize,
    ) -> Result<Vec<ListedRun>, StoreError> {
        match self {
            Store::Redis(redis) => redis.listed_runs(uid, after, count).await,
            Store::Memory(memory) => Ok(memory.listed_runs(uid, after, count)),
        }
    }
}

impl RedisStore {
    async fn listed_runs(
        &self,
        uid: Option<&str>,
        after: Option<&RunCursor>,
        count: usize,
    ) -> Result<Vec<ListedRun>, StoreError> {
        if count == 0 {
            return Ok(Vec::new());
        }
        let key = uid.map_or_else(|| keys::ALL_RUNS.to_string(), keys::user_runs);
        // Runs created in the same millisecond as the cursor's and already passed are read again and
        // skipped, so the reads go on until the page is full or the list ends.
        let max = after.map_or_else(|| "+inf".to_string(), |a| a.created_ms.to_string());
        let mut places: Vec<RunCursor> = Vec::with_capacity(count);
        let mut offset = 0;
        loop {
            let want = count - places.len() + 16;
            let read: Vec<(String, f64)> = self
                .read(
                    redis::cmd("ZREVRANGEBYSCORE")
                        .arg(&key)
                        .arg(&max)
                        .arg("-inf")
                        .arg("WITHSCORES")
                        .arg("LIMIT")
                        .arg(offset)
                        .arg(want),
                )
                .await?;
            let last = read.len() < want;
            offset += read.len();
            places.extend(
                read.into_iter()
                    .map(|(run_id, score)| RunCursor { created_ms: score as i64, run_id })
                    .filter(|place| after.is_none_or(|a| place < a)),
            );
            places.truncate(count);
            if last || places.len() == count {
                break;
            }
        }
        if places.is_empty() {
            return Ok(Vec::new());
        }
        let mut mget = redis::cmd("MGET");
        for place in &places {
            mget.arg(keys::run_record(&place.run_id));
        }
        let records: Vec<Option<String>> = self.read(&mut mget).await?;
        // A record is listed only for its own user, whatever the list names.
        let of_user = |record: &RunRecord| uid.is_none_or(|uid| record.uid == uid);
        Ok(places
            .into_iter()
            .zip(records)
            .map(|(place, raw)| {
                let record = raw.and_then(|text| serde_json::from_str::<RunRecord>(&text).ok()).filter(of_user);
                (place, record)
            })
            .collect())
    }
}
