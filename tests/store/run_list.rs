//! The list of runs on both stores (Redis and in-process): a user's runs newest first, in pages that
//! lose and repeat nothing (runs created in the same millisecond included), never another user's; on
//! Redis, bounded per user.

use yuxi_operator::run::{RunLimits, RunRecord};
use yuxi_operator::store::run_list::RunCursor;
use yuxi_operator::store::{Store, StoreAuth, keys};

use crate::run_ends::pending;
use crate::support::redis::{redis_url, unique};

const LIMITS: RunLimits = RunLimits { per_user: 100_000, total: 100_000 };

async fn both_stores() -> [Store; 2] {
    let redis = Store::connect_redis(&redis_url(), StoreAuth::Required).await.expect("the test Redis answers");
    [redis, Store::memory()]
}

/// A run of `uid` created at `second` plus `millis`, ended so it holds no limit.
async fn created(store: &Store, uid: &str, second: i64, millis: i64) -> RunRecord {
    let mut record = pending(&unique("run"), &unique("thread"));
    record.uid = uid.into();
    record.created_at = jiff::Timestamp::from_millisecond(second * 1000 + millis).expect("time").to_string();
    store.create_run(&record, None, LIMITS).await.expect("create");
    store.end_run(&record.run_id, yuxi_operator::run::RunStatus::Completed, None).await.expect("end");
    record
}

async fn all_pages(store: &Store, uid: Option<&str>, page: usize) -> Vec<RunCursor> {
    let mut seen = Vec::new();
    let mut after: Option<RunCursor> = None;
    loop {
        let listed = store.listed_runs(uid, after.as_ref(), page).await.expect("list");
        let short = listed.len() < page;
        for (place, record) in &listed {
            assert_eq!(record.as_ref().map(|r| r.run_id.as_str()), Some(place.run_id.as_str()));
        }
        after = listed.last().map(|(place, _)| place.clone());
        seen.extend(listed.into_iter().map(|(place, _)| place));
        if short {
            return seen;
        }
    }
}

#[tokio::test]
async fn pages_of_a_users_runs_are_newest_first_and_lose_or_repeat_nothing_even_within_one_millisecond() {
    for store in both_stores().await {
        let (alice, bob) = (unique("alice"), unique("bob"));
        let mut made = Vec::new();
        // 40 runs in one millisecond (more than a page and its read-ahead), and 15 in their own.
        for _ in 0..40 {
            made.push(created(&store, &alice, 1_900_000_000, 5).await);
        }
        for n in 0..15 {
            made.push(created(&store, &alice, 1_900_000_000 + n, 7).await);
        }
        created(&store, &bob, 1_900_000_000, 6).await;
        let seen = all_pages(&store, Some(&alice), 7).await;
        let mut expected: Vec<RunCursor> = made
            .iter()
            .map(|r| RunCursor {
                created_ms: r.created_at.parse::<jiff::Timestamp>().unwrap().as_millisecond(),
                run_id: r.run_id.clone(),
            })
            .collect();
        expected.sort_by(|a, b| b.cmp(a));
        assert_eq!(seen, expected, "every run of alice once, newest first, and none of bob's");
    }
}

#[tokio::test]
async fn a_users_list_keeps_the_newest_runs_within_its_bound() {
    let store = Store::connect_redis(&redis_url(), StoreAuth::Required).await.expect("the test Redis answers");
    let carol = unique("carol");
    let extra = 5;
    let mut first = Vec::new();
    for n in 0..keys::MAX_USER_RUNS_LISTED + extra {
        let record = created(&store, &carol, 1_900_000_000 + n as i64, 0).await;
        if n < extra {
            first.push(record.run_id);
        }
    }
    let listed = store.listed_runs(Some(&carol), None, keys::MAX_USER_RUNS_LISTED * 2).await.expect("list");
    assert_eq!(listed.len(), keys::MAX_USER_RUNS_LISTED);
    assert!(listed.iter().all(|(place, _)| !first.contains(&place.run_id)), "the oldest runs went first");
}
