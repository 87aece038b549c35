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

use std::collections::HashMap;

use crate::resources::TokenUsage;
use crate::run::budget::{ModelCall, TreeUsage, UsageTarget};
use crate::store::types::StoreError;
use crate::store::{Store, keys};

/// How long a tree's count is kept after its last write, in seconds (the result's seven days).
const TREE_TTL_SECONDS: i64 = keys::RESULT_TTL_SECONDS;
/// How long a day's counts are kept, in seconds (two days: today's, and yesterday's for a while).
const DAY_TTL_SECONDS: i64 = 2 * 24 * 3600;

/// Token usage.
impl Store {
    /// Adds one model `call` (its tokens, its cost, its model) to `target`'s tree, to the counts of
    /// `day` (`YYYY-MM-DD`, UTC) of its namespace and user, and to the model's totals, in one step;
    /// answers the tree's count and budget afterwards.
    pub async fn record_usage(
        &self,
        target: &UsageTarget,
        call: &ModelCall,
        day: &str,
    ) -> Result<TreeUsage, StoreError> {
        let usage = &call.usage;
        match self {
            Store::Memory(memory) => Ok(memory.usage().record(target, call, day)),
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
                if let Some((currency, max)) = &target.max_cost {
                    pipe.hset(&tree, "max_cost", format!("{currency} {max}")).ignore();
                }
                if let Some((currency, picos)) = &call.cost {
                    pipe.hincr(&tree, format!("cost:{currency}"), *picos).ignore();
                }
                pipe.expire(&tree, TREE_TTL_SECONDS).ignore();
                for key in [
                    keys::namespace_day_usage(day, &target.namespace),
                    keys::user_day_usage(day, &target.namespace, &target.uid),
                ] {
                    pipe.incr(&key, usage.total_tokens).ignore().expire(&key, DAY_TTL_SECONDS).ignore();
                }
                pipe.cmd("HGETALL").arg(&tree);
                let (fields,): (HashMap<String, String>,) = pipe.query_async(&mut redis.connection()).await?;
                // The per-model totals, outside the atomic step: a metric, not a budget.
                let mut totals = ::redis::pipe();
                let fields_now: i64 = redis.read(::redis::cmd("HLEN").arg(keys::MODEL_TOTALS)).await?;
                if (fields_now as usize) < keys::MAX_MODEL_TOTALS {
                    for (kind, amount) in model_kinds(call) {
                        totals
                            .hincr(keys::MODEL_TOTALS, total_field(&target.namespace, &call.model, &kind), amount)
                            .ignore();
                    }
                    let () = totals.query_async(&mut redis.connection()).await?;
                }
                Ok(tree_usage_of(&fields))
            }
        }
    }

    /// The count and budget of the tree rooted at `root` (zero and none for a tree not counted yet).
    pub async fn tree_usage(&self, root: &str) -> Result<TreeUsage, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.usage().tree(root)),
            Store::Redis(redis) => {
                let fields: HashMap<String, String> =
                    redis.read(::redis::cmd("HGETALL").arg(keys::tree_usage(root))).await?;
                Ok(tree_usage_of(&fields))
            }
        }
    }

    /// Every model's totals: `(namespace, model, kind, amount)`, kind `prompt`, `completion`, `cached`
    /// (tokens) or `cost:<CURRENCY>` (pico-units), sorted.
    pub async fn model_totals(&self) -> Result<Vec<(String, String, String, i64)>, StoreError> {
        let fields: Vec<(String, i64)> = match self {
            Store::Memory(memory) => memory.usage().model_totals(),
            Store::Redis(redis) => {
                let map: HashMap<String, i64> = redis.read(::redis::cmd("HGETALL").arg(keys::MODEL_TOTALS)).await?;
                map.into_iter().collect()
            }
        };
        Ok(split_totals(fields))
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

/// Totals' fields `<namespace>\t<name>\t<kind>` with their amounts as `(namespace, name, kind,
/// amount)`, sorted; a field of another shape is left out.
pub(in crate::store) fn split_totals(fields: Vec<(String, i64)>) -> Vec<(String, String, String, i64)> {
    let mut totals: Vec<(String, String, String, i64)> = fields
        .into_iter()
        .filter_map(|(field, amount)| {
            let mut parts = field.splitn(3, '\t');
            Some((parts.next()?.to_string(), parts.next()?.to_string(), parts.next()?.to_string(), amount))
        })
        .collect();
    totals.sort();
    totals
}

/// The field of the total of `kind` of a model or an agent (`name`) in [`keys::MODEL_TOTALS`] or
/// [`keys::RUN_TOTALS`].
pub(in crate::store) fn total_field(namespace: &str, name: &str, kind: &str) -> String {
    format!("{namespace}\t{name}\t{kind}")
}

/// What one call adds to its model's totals, by kind.
pub(in crate::store) fn model_kinds(call: &ModelCall) -> Vec<(String, i64)> {
    let mut kinds = vec![
        ("prompt".to_string(), call.usage.prompt_tokens),
        ("completion".to_string(), call.usage.completion_tokens),
        ("cached".to_string(), call.usage.cached_prompt_tokens),
    ];
    if let Some((currency, picos)) = &call.cost {
        kinds.push((format!("cost:{currency}"), *picos));
    }
    if let Some(ms) = call.latency_ms {
        kinds.extend(crate::run::metrics::observation("latency", ms));
    }
    if let Some(ms) = call.time_to_first_token_ms {
        kinds.extend(crate::run::metrics::observation("ttft", ms));
    }
    kinds
}

/// A tree's usage from its hash's fields.
fn tree_usage_of(fields: &HashMap<String, String>) -> TreeUsage {
    let number = |name: &str| fields.get(name).and_then(|v| v.parse::<i64>().ok());
    TreeUsage {
        usage: TokenUsage {
            prompt_tokens: number("prompt").unwrap_or(0),
            completion_tokens: number("completion").unwrap_or(0),
            total_tokens: number("total").unwrap_or(0),
            cached_prompt_tokens: 0,
        },
        max_tokens: number("max"),
        cost: fields
            .iter()
            .filter_map(|(name, value)| Some((name.strip_prefix("cost:")?.to_string(), value.parse().ok()?)))
            .collect(),
        max_cost: fields.get("max_cost").and_then(|v| {
            let (currency, picos) = v.split_once(' ')?;
            Some((currency.to_string(), picos.parse().ok()?))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(root: &str, uid: &str, max: Option<i64>) -> UsageTarget {
        UsageTarget {
            root_run_id: root.into(),
            max_tokens: max,
            max_cost: None,
            namespace: "team-a".into(),
            uid: uid.into(),
        }
    }

    fn tokens(total: i64) -> ModelCall {
        ModelCall {
            usage: TokenUsage {
                prompt_tokens: total - 1,
                completion_tokens: 1,
                total_tokens: total,
                cached_prompt_tokens: 0,
            },
            cost: None,
            model: "scripted/echo".into(),
            latency_ms: Some(120),
            time_to_first_token_ms: None,
        }
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

    #[tokio::test]
    async fn a_trees_cost_adds_up_by_currency_against_its_cost_budget_and_models_keep_totals() {
        let store = Store::memory();
        let day = "2026-12-05";
        let mut root = target("root", "alice", None);
        root.max_cost = Some(("USD".into(), 3_000_000_000));
        let priced = |picos: i64, currency: &str| ModelCall {
            cost: Some((currency.to_string(), picos)),
            model: "team-a-model".into(),
            ..tokens(10)
        };
        store.record_usage(&root, &priced(2_000_000_000, "USD"), day).await.expect("counted");
        let child =
            store.record_usage(&target("root", "alice", None), &priced(500, "CNY"), day).await.expect("counted");
        assert!(!child.exhausted(), "{child:?}");
        let after = store
            .record_usage(&target("root", "alice", None), &priced(1_000_000_000, "USD"), day)
            .await
            .expect("counted");
        assert_eq!(after.cost.get("USD"), Some(&3_000_000_000));
        assert_eq!(after.cost.get("CNY"), Some(&500));
        assert!(after.exhausted(), "the root's cost budget holds for its children's calls");
        let totals = store.model_totals().await.expect("totals");
        assert!(
            totals.contains(&("team-a".into(), "team-a-model".into(), "cost:USD".into(), 3_000_000_000)),
            "{totals:?}"
        );
        assert!(totals.contains(&("team-a".into(), "team-a-model".into(), "prompt".into(), 27)), "{totals:?}");
        // Each call's latency is in the model's histogram.
        assert!(totals.contains(&("team-a".into(), "team-a-model".into(), "latency:count".into(), 3)), "{totals:?}");
        assert!(totals.contains(&("team-a".into(), "team-a-model".into(), "latency:le:250".into(), 3)), "{totals:?}");
    }
}
