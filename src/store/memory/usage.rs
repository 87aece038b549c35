//! The in-process token usage counts ([`MemoryUsage`]) the memory store holds
//! ([`MemoryStore::usage`](super::MemoryStore::usage)); the usage operations of the store, for both
//! backends, are in [`crate::store::usage`].

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::run::budget::{ModelCall, TreeUsage, UsageTarget};
use crate::store::keys;

/// The most trees the in-process store counts; the oldest is forgotten first.
pub const MAX_TREES: usize = 100_000;

/// The in-process counts.
#[derive(Clone, Default)]
pub struct MemoryUsage(Arc<Mutex<Counts>>);

#[derive(Default)]
struct Counts {
    trees: HashMap<String, TreeUsage>,
    /// The trees in the order they were first counted.
    order: VecDeque<String>,
    /// The day's counts by key, for the days in `days`.
    days: HashMap<String, i64>,
    /// The days counted, latest last.
    counted_days: VecDeque<String>,
    /// Every model's totals, by [`crate::store::usage::total_field`] (at most
    /// [`keys::MAX_MODEL_TOTALS`] of them).
    models: HashMap<String, i64>,
    /// Every agent's run totals (at most [`keys::MAX_RUN_TOTALS`] of them).
    runs: HashMap<String, i64>,
}

impl MemoryUsage {
    fn counts(&self) -> std::sync::MutexGuard<'_, Counts> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(in crate::store) fn record(&self, target: &UsageTarget, call: &ModelCall, day: &str) -> TreeUsage {
        let usage = &call.usage;
        let mut counts = self.counts();
        for (kind, amount) in crate::store::usage::model_kinds(call) {
            let field = crate::store::usage::total_field(&target.namespace, &call.model, &kind);
            if counts.models.len() < keys::MAX_MODEL_TOTALS || counts.models.contains_key(&field) {
                *counts.models.entry(field).or_default() += amount;
            }
        }
        if !counts.counted_days.iter().any(|d| d == day) {
            counts.counted_days.push_back(day.to_string());
            while counts.counted_days.len() > 2 {
                let old = counts.counted_days.pop_front().expect("a day");
                counts.days.retain(|key, _| !key.starts_with(&format!("yuxi:usage:{old}:")));
            }
        }
        *counts.days.entry(keys::namespace_day_usage(day, &target.namespace)).or_default() += usage.total_tokens;
        *counts.days.entry(keys::user_day_usage(day, &target.namespace, &target.uid)).or_default() +=
            usage.total_tokens;
        if !counts.trees.contains_key(&target.root_run_id) {
            counts.order.push_back(target.root_run_id.clone());
            while counts.order.len() > MAX_TREES {
                let oldest = counts.order.pop_front().expect("a tree");
                counts.trees.remove(&oldest);
            }
        }
        let tree = counts.trees.entry(target.root_run_id.clone()).or_default();
        tree.usage.prompt_tokens += usage.prompt_tokens;
        tree.usage.completion_tokens += usage.completion_tokens;
        tree.usage.total_tokens += usage.total_tokens;
        if target.max_tokens.is_some() {
            tree.max_tokens = target.max_tokens;
        }
        if target.max_cost.is_some() {
            tree.max_cost = target.max_cost.clone();
        }
        if let Some((currency, picos)) = &call.cost {
            *tree.cost.entry(currency.clone()).or_default() += picos;
        }
        tree.clone()
    }

    pub(in crate::store) fn add_run_totals(&self, fields: Vec<(String, i64)>) {
        let mut counts = self.counts();
        for (field, amount) in fields {
            if counts.runs.len() < keys::MAX_RUN_TOTALS || counts.runs.contains_key(&field) {
                *counts.runs.entry(field).or_default() += amount;
            }
        }
    }

    pub(in crate::store) fn run_totals(&self) -> Vec<(String, i64)> {
        self.counts().runs.iter().map(|(field, amount)| (field.clone(), *amount)).collect()
    }

    pub(in crate::store) fn model_totals(&self) -> Vec<(String, i64)> {
        self.counts().models.iter().map(|(field, amount)| (field.clone(), *amount)).collect()
    }

    pub(in crate::store) fn tree(&self, root: &str) -> TreeUsage {
        self.counts().trees.get(root).cloned().unwrap_or_default()
    }

    pub(in crate::store) fn today(&self, day: &str, namespace: &str, uid: &str) -> (i64, i64) {
        let counts = self.counts();
        let get = |key: String| counts.days.get(&key).copied().unwrap_or(0);
        (get(keys::user_day_usage(day, namespace, uid)), get(keys::namespace_day_usage(day, namespace)))
    }
}
