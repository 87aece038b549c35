//! Token budgets and quotas, typed once: a run tree's shared budget (`spec.budget.maxTokens`), the
//! daily quotas per user and per namespace, the reasons a run stops for them, and the keys of the day
//! they are counted under (docs/concepts/budgets.md).
//!
//! A run tree is a run started without a parent run of this system (its root) and every run it starts,
//! and theirs. Every model call of the tree adds its tokens to the tree's count; a run checks the count
//! before each model call and after it, and stops with [`BUDGET_EXCEEDED`] once the count has reached
//! the budget. The quotas are checked when a run starts, by the facade and by the controller.

use serde::{Deserialize, Serialize};

use crate::resources::TokenUsage;

/// The reason of a run stopped because its tree used its budget.
pub const BUDGET_EXCEEDED: &str = "BudgetExceeded";

/// The reason of a run refused because a daily token quota is used up.
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";

/// What a run tree has used of its budget.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TreeUsage {
    /// Tokens used by every run of the tree, summed.
    pub usage: TokenUsage,
    /// The tree's budget, when it has one.
    pub max_tokens: Option<i64>,
    /// What the tree's priced model calls cost, in pico-units by currency
    /// ([`crate::resources::model::cost_picos`]).
    #[serde(default)]
    pub cost: std::collections::BTreeMap<String, i64>,
    /// The tree's cost budget: its currency and pico-units.
    #[serde(default)]
    pub max_cost: Option<(String, i64)>,
}

impl TreeUsage {
    /// Whether the tree has used its budget, in tokens or in cost: no model call may be made for it any
    /// more.
    pub fn exhausted(&self) -> bool {
        self.max_tokens.is_some_and(|max| self.usage.total_tokens >= max) || self.cost_exhausted()
    }

    fn cost_exhausted(&self) -> bool {
        self.max_cost.as_ref().is_some_and(|(currency, max)| self.cost.get(currency).is_some_and(|spent| spent >= max))
    }

    /// What a run stopped by its budget says: `the run tree used N tokens of its budget of M`, or
    /// `the run tree cost X CUR of its budget of Y CUR`.
    pub fn message(&self) -> String {
        if self.max_tokens.is_none_or(|max| self.usage.total_tokens < max)
            && let Some((currency, max)) = self.max_cost.as_ref().filter(|_| self.cost_exhausted())
        {
            let spent = self.cost.get(currency).copied().unwrap_or_default();
            return format!(
                "the run tree cost {} {currency} of its budget of {} {currency} (spec.budget.maxCost)",
                crate::resources::model::format_picos(spent),
                crate::resources::model::format_picos(*max)
            );
        }
        format!(
            "the run tree used {} tokens of its budget of {} (spec.budget.maxTokens)",
            self.usage.total_tokens,
            self.max_tokens.unwrap_or_default()
        )
    }

    /// The tree's cost, one amount per currency, in the form status and results show.
    pub fn cost_amounts(&self) -> Vec<crate::resources::CostAmount> {
        self.cost
            .iter()
            .map(|(currency, picos)| crate::resources::CostAmount {
                currency: currency.clone(),
                amount: crate::resources::model::format_picos(*picos),
            })
            .collect()
    }
}

/// One model call as it is counted: its tokens, its cost when its Model states a price, and the model
/// it was made on (a Model's name or `<provider>/<model>`), for the per-model totals.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCall {
    /// Its tokens.
    pub usage: TokenUsage,
    /// Its cost: currency and pico-units.
    pub cost: Option<(String, i64)>,
    /// The model.
    pub model: String,
    /// How long the call took, in milliseconds, for the model latency histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_ms: Option<u64>,
    /// From the request to its first streamed token, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_first_token_ms: Option<u64>,
}

/// Where a model call's tokens are counted: its tree, and the day's counts of its user and namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageTarget {
    /// The root of the run's tree.
    pub root_run_id: String,
    /// The tree's budget, when it has one (stored with the count, so every run of the tree reads it).
    pub max_tokens: Option<i64>,
    /// The tree's cost budget (currency, pico-units), when it has one, stored likewise.
    #[serde(default)]
    pub max_cost: Option<(String, i64)>,
    /// The run's namespace (`default` in the local mode).
    pub namespace: String,
    /// The run's user.
    pub uid: String,
}

/// The daily token quotas (`--max-tokens-per-user-per-day`, `--max-tokens-per-namespace-per-day`; the
/// chart's `quotas`): `None` is unlimited. Days are UTC days.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DailyQuotas {
    /// Tokens one user's runs may use in a day, in one namespace.
    pub per_user: Option<i64>,
    /// Tokens all runs of one namespace may use in a day.
    pub per_namespace: Option<i64>,
}

/// A daily quota that is used up: which, its setting, and its count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaUsedUp {
    /// The setting's name: `max_tokens_per_user_per_day` or `max_tokens_per_namespace_per_day`.
    pub limit: &'static str,
    /// The quota.
    pub quota: i64,
    /// Tokens used today.
    pub used: i64,
}

impl QuotaUsedUp {
    /// What a refused start says.
    pub fn message(&self) -> String {
        let whose = if self.limit == "max_tokens_per_user_per_day" { "you have" } else { "this namespace has" };
        format!("{whose} used {} tokens today, the most allowed ({} {})", self.used, self.limit, self.quota)
    }
}

impl DailyQuotas {
    /// The first quota used up by `user_today` and `namespace_today` (tokens used today), if any.
    pub fn used_up(&self, user_today: i64, namespace_today: i64) -> Option<QuotaUsedUp> {
        if let Some(quota) = self.per_user
            && user_today >= quota
        {
            return Some(QuotaUsedUp { limit: "max_tokens_per_user_per_day", quota, used: user_today });
        }
        if let Some(quota) = self.per_namespace
            && namespace_today >= quota
        {
            return Some(QuotaUsedUp { limit: "max_tokens_per_namespace_per_day", quota, used: namespace_today });
        }
        None
    }

    /// Whether any quota is set.
    pub fn any(&self) -> bool {
        self.per_user.is_some() || self.per_namespace.is_some()
    }
}

/// The UTC day `at` falls in, `YYYY-MM-DD`: what daily counts are keyed by.
pub fn day_of(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%d").to_string()
}

/// Seconds from `at` to the next UTC midnight (at least 1): when a used-up daily quota frees again.
pub fn seconds_to_next_day(at: jiff::Timestamp) -> u64 {
    let day = at.as_second().div_euclid(86_400);
    ((day + 1) * 86_400 - at.as_second()).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_is_exhausted_once_it_reached_its_budget_and_never_without_one() {
        let used = |total: i64, max: Option<i64>| TreeUsage {
            usage: TokenUsage { total_tokens: total, ..TokenUsage::default() },
            max_tokens: max,
            ..TreeUsage::default()
        };
        assert!(!used(99, Some(100)).exhausted());
        assert!(used(100, Some(100)).exhausted());
        assert!(used(150, Some(100)).exhausted());
        assert!(!used(1_000_000, None).exhausted());
        assert_eq!(
            used(150, Some(100)).message(),
            "the run tree used 150 tokens of its budget of 100 (spec.budget.maxTokens)"
        );
    }

    #[test]
    fn the_user_quota_is_named_before_the_namespace_one() {
        let quotas = DailyQuotas { per_user: Some(1000), per_namespace: Some(5000) };
        assert_eq!(quotas.used_up(999, 4999), None);
        assert_eq!(quotas.used_up(1000, 6000).map(|q| q.limit), Some("max_tokens_per_user_per_day"));
        assert_eq!(quotas.used_up(10, 5000).map(|q| q.limit), Some("max_tokens_per_namespace_per_day"));
        assert_eq!(DailyQuotas::default().used_up(i64::MAX, i64::MAX), None);
    }

    #[test]
    fn days_are_utc_days() {
        let at: jiff::Timestamp = "2026-12-03T23:59:30Z".parse().expect("time");
        assert_eq!(day_of(at), "2026-12-03");
        assert_eq!(seconds_to_next_day(at), 30);
    }

    #[test]
    fn a_tree_is_exhausted_once_its_cost_in_the_budgets_currency_reached_it() {
        let tree = |spent: &[(&str, i64)]| TreeUsage {
            cost: spent.iter().map(|(c, p)| (c.to_string(), *p)).collect(),
            max_cost: Some(("USD".to_string(), 1_000_000_000_000)),
            ..TreeUsage::default()
        };
        assert!(!tree(&[("USD", 999_999_999_999)]).exhausted());
        assert!(!tree(&[("CNY", 5_000_000_000_000)]).exhausted(), "another currency does not count");
        let spent = tree(&[("USD", 1_250_000_000_000)]);
        assert!(spent.exhausted());
        assert_eq!(
            spent.message(),
            "the run tree cost 1.250000 USD of its budget of 1.000000 USD (spec.budget.maxCost)"
        );
        assert_eq!(spent.cost_amounts()[0].amount, "1.250000");
    }
}
