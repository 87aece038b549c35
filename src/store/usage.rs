//! Token usage counts ([`crate::run::budget`]): each run tree's, shared by its runs and read against its
//! budget, and each day's per namespace and per user, read against the daily quotas. Counted by the
//! runner after every model call; read by the runner before each call and at its end, and by the facade
//! and the controller when a run starts.
//!
//! With Redis: the tree's count is the hash `yuxi:tree:{root}:usage` (`prompt`, `completion`, `total`,
//! `max`), kept seven days after its last write; the day's counts are `yuxi:usage:{day}:ns:{ns}` and
//! `yuxi:usage:{day}:user:{ns}:{uid}`, kept two days. One model call's tokens go into all three in one
//! atomic step. In process: the same counts in memory, at most `MAX_TREES` trees and the days of
//! the last two days (`memory/usage.rs`). The keys are those of [`keys`].

use crate::resources::TokenUsage;
use crate::run::budget::{TreeUsage, UsageTarget};
use crate::store::types::StoreError;
use crate::store::{Store, keys};

/// How long a tree's count is kept after its last write, in seconds (the result's seven days).
const TREE_TTL_SECONDS: i64 = keys::RESULT_TTL_SECONDS;
/// How long a day's counts are kept, in seconds (two days: today's, and yesterday's for a while).
const DAY_TTL_SECONDS: i64 = 2 * 24 * 3600;

/// Token usage.
impl Store {
    /// Adds one model call's `usage` to `target`'s tree and to the counts of `day` (`YYYY-MM-DD`, UTC)
    /// of its namespace and user, in one step; answers the tree's count and budget afterwards.
    pub async fn record_usage(
        &self,
        target: &UsageTarget,
        usage: &TokenUsage,
        day: &str,
    ) -> Result<TreeUsage, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.usage().record(target, usage, day)),
            Store::Redis(redis) => {
                let tree = keys::tree_usage(&target.root_run_id);
                let mut pipe = ::redis::pipe();
                pipe.atomic()
                    .hincr(&tree, "prompt", usage.prompt_tokens)
                    .ignore()
                    .hincr(&tree, "completion", usage.completion_tokens)
                    .ignore()
                    .hincr(&tree, "total", usage.total_tokens)
                    .ignore();
                if let Some(max) = target.max_tokens {
                    pipe.hset(&tree, "max", max).ignore();
                }
                pipe.expire(&tree, TREE_TTL_SECONDS).ignore();
                for key in [
                    keys::namespace_day_usage(day, &target.namespace),
                    keys::user_day_usage(day, &target.namespace, &target.uid),
                ] {
                    pipe.incr(&key, usage.total_tokens).ignore().expire(&key, DAY_TTL_SECONDS).ignore();
                }
                pipe.cmd("HMGET").arg(&tree).arg(&["prompt", "completion", "total", "max"]);
                let (counts,): (Vec<Option<i64>>,) = pipe.query_async(&mut redis.connection()).await?;
                Ok(tree_usage_of(&counts))
            }
        }
    }

    /// The count and budget of the tree rooted at `root` (zero and none for a tree not counted yet).
    pub async fn tree_usage(&self, root: &str) -> Result<TreeUsage, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.usage().tree(root)),
            Store::Redis(redis) => {
                let counts: Vec<Option<i64>> = redis
                    .read(::redis::cmd("HMGET").arg(keys::tree_usage(root)).arg(&[
                        "prompt",
                        "completion",
                        "total",
                        "max",
                    ]))
                    .await?;
                Ok(tree_usage_of(&counts))
            }
        }
    }

    /// The tokens `uid` and all of `namespace` have used on `day`: `(user, namespace)`.
    pub async fn usage_today(&self, day: &str, namespace: &str, uid: &str) -> Result<(i64, i64), StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.usage().today(day, namespace, uid)),
            Store::Redis(redis) => {
                let keys = [keys::user_day_usage(day, namespace, uid), keys::namespace_day_usage(day, namespace)];
                let counts: Vec<Option<i64>> = redis.read(::redis::cmd("MGET").arg(&keys)).await?;
                Ok((counts.first().copied().flatten().unwrap_or(0), counts.get(1).copied().flatten().unwrap_or(0)))
            }
        }
    }
}

/// A tree's usage from its hash fields `prompt`, `completion`, `total`, `max`.
fn tree_usage_of(counts: &[Option<i64>]) -> TreeUsage {
    let at = |i: usize| counts.get(i).copied().flatten();
    TreeUsage {
        usage: TokenUsage {
            prompt_tokens: at(0).unwrap_or(0),
            completion_tokens: at(1).unwrap_or(0),
            total_tokens: at(2).unwrap_or(0),
            cached_prompt_tokens: 0,
        },
        max_tokens: at(3),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(root: &str, uid: &str, max: Option<i64>) -> UsageTarget {
        UsageTarget { root_run_id: root.into(), max_tokens: max, namespace: "team-a".into(), uid: uid.into() }
    }

    fn tokens(total: i64) -> TokenUsage {
        TokenUsage { prompt_tokens: total - 1, completion_tokens: 1, total_tokens: total, cached_prompt_tokens: 0 }
    }

    #[tokio::test]
    async fn runs_of_a_tree_share_its_count_and_days_count_per_user_and_namespace() {
        let store = Store::memory();
        let day = "2026-12-03";
        store.record_usage(&target("root", "alice", Some(100)), &tokens(40), day).await.expect("counted");
        let after = store.record_usage(&target("root", "alice", None), &tokens(70), day).await.expect("counted");
        assert_eq!((after.usage.total_tokens, after.max_tokens, after.exhausted()), (110, Some(100), true));
        store.record_usage(&target("other", "bob", None), &tokens(5), day).await.expect("counted");
        assert_eq!(store.tree_usage("other").await.expect("read").usage.total_tokens, 5);
        assert_eq!(store.usage_today(day, "team-a", "alice").await.expect("read"), (110, 115));
        assert_eq!(store.usage_today("2026-12-04", "team-a", "alice").await.expect("read"), (0, 0));
    }
}
