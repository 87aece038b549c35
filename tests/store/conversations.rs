//! Conversations on both stores: changes made at once all hold (none is written over by a whole record
//! written back), a list is its owner's alone, and a deleted conversation leaves the list.

use yuxi_operator::run::conversation::{Conversation, ConversationChange};
use yuxi_operator::store::{Store, StoreAuth};

use crate::support::redis::{redis_url, unique};

fn conversation(thread_id: &str, uid: &str) -> Conversation {
    Conversation {
        thread_id: thread_id.into(),
        uid: uid.into(),
        agent_slug: "deep-research".into(),
        title: "first".into(),
        is_pinned: false,
        metadata: serde_json::from_str(r#"{"tags": [], "nested": {"empty": []}}"#).expect("JSON"),
        created_at: "2026-12-02T00:00:00Z".into(),
        updated_at: "2026-12-02T00:00:00Z".into(),
        last_run_id: None,
        viewed_run_id: None,
        queue_paused: false,
    }
}

async fn stores() -> Vec<Store> {
    vec![
        Store::memory(),
        Store::connect_redis(&redis_url(), StoreAuth::Required).await.expect("the test Redis answers"),
    ]
}

#[tokio::test]
async fn changes_made_at_once_all_hold_and_keep_the_metadata_as_it_was() {
    for store in stores().await {
        let (thread, uid) = (unique("t-conv"), unique("u"));
        assert!(store.claim_thread(&thread, &uid).await.expect("claim"));
        store.put_conversation(&conversation(&thread, &uid)).await.expect("put");
        let changes = [
            ConversationChange::Title("retitled".into()),
            ConversationChange::Pinned(true),
            ConversationChange::LastRun("run-2".into()),
            ConversationChange::Viewed("run-1".into()),
            ConversationChange::QueuePaused(true),
        ];
        let all =
            futures::future::join_all(changes.iter().map(|change| store.change_conversation(&thread, change))).await;
        assert!(all.into_iter().all(|changed| changed.expect("store")), "every change finds the conversation");
        let now = store.conversation(&thread).await.expect("store").expect("kept");
        assert_eq!(
            (
                now.title.as_str(),
                now.is_pinned,
                now.last_run_id.as_deref(),
                now.viewed_run_id.as_deref(),
                now.queue_paused
            ),
            ("retitled", true, Some("run-2"), Some("run-1"), true)
        );
        assert_eq!(serde_json::Value::Object(now.metadata), serde_json::json!({"tags": [], "nested": {"empty": []}}));
        assert_ne!(now.updated_at, "2026-12-02T00:00:00Z", "a retitle moves it up");
        assert!(!store.change_conversation(&unique("t-none"), &ConversationChange::Pinned(true)).await.expect("store"));
    }
}

#[tokio::test]
async fn a_list_is_its_owners_alone_and_a_deleted_conversation_leaves_it() {
    for store in stores().await {
        let (alice, bob) = (unique("alice"), unique("bob"));
        let (first, second) = (unique("t-a"), unique("t-b"));
        for thread in [&first, &second] {
            assert!(store.claim_thread(thread, &alice).await.expect("claim"));
            store.put_conversation(&conversation(thread, &alice)).await.expect("put");
        }
        store.change_conversation(&first, &ConversationChange::Title("latest".into())).await.expect("change");
        let listed: Vec<String> =
            store.user_conversations(&alice, 0, 10).await.expect("list").into_iter().map(|c| c.thread_id).collect();
        assert_eq!(listed, [first.clone(), second.clone()], "the most recently changed first");
        assert!(store.user_conversations(&bob, 0, 10).await.expect("list").is_empty());
        let gone = store.conversation(&first).await.expect("store").expect("kept");
        store.delete_conversation(&gone).await.expect("delete");
        let listed: Vec<String> =
            store.user_conversations(&alice, 0, 10).await.expect("list").into_iter().map(|c| c.thread_id).collect();
        assert_eq!(listed, [second]);
        assert!(store.conversation(&first).await.expect("store").is_none());
        assert!(!store.change_conversation(&first, &ConversationChange::Pinned(true)).await.expect("store"));
    }
}

#[tokio::test]
async fn a_user_keeps_their_latest_conversations_and_never_pushes_out_another_users() {
    use yuxi_operator::run::conversation::MAX_CONVERSATIONS_PER_USER;
    for store in stores().await {
        let (alice, bob) = (unique("alice"), unique("bob"));
        let bobs = unique("t-bob");
        assert!(store.claim_thread(&bobs, &bob).await.expect("claim"));
        store.put_conversation(&conversation(&bobs, &bob)).await.expect("put");
        // Alice writes five more conversations than a user keeps, after Bob's one.
        let threads: Vec<String> =
            (0..MAX_CONVERSATIONS_PER_USER + 5).map(|n| format!("{}-{n}", unique("t-a"))).collect();
        for thread in &threads {
            assert!(store.claim_thread(thread, &alice).await.expect("claim"));
            store.put_conversation(&conversation(thread, &alice)).await.expect("put");
        }
        assert_eq!(store.conversation(&bobs).await.expect("store").map(|c| c.uid), Some(bob.clone()));
        assert_eq!(store.user_conversations(&bob, 0, 10).await.expect("list").len(), 1, "Bob's list is whole");
        for thread in &threads[..5] {
            assert!(store.conversation(thread).await.expect("store").is_none(), "Alice's own oldest are forgotten");
        }
        let kept = store.user_conversations(&alice, 0, 2 * MAX_CONVERSATIONS_PER_USER).await.expect("list");
        assert_eq!(kept.len(), MAX_CONVERSATIONS_PER_USER);
        assert_eq!(kept[0].thread_id, threads[threads.len() - 1], "the latest first");
    }
}
