//! Pushed notices: a watch of a run is woken by the run's writes made elsewhere (another connection, as
//! a runner's; another handle of the in-process store), and only by its own run's; a runner on the
//! store socket or on Redis is told of its cancel as it is asked.

use std::time::Duration;

use serde_json::json;
use yuxi_operator::run::EventKind;
use yuxi_operator::store::{RunnerStoreClient, Store, StoreAuth};

use crate::support::redis::{redis_url, unique};

/// A watcher's store and a writer's store: two Redis connections, or two handles of one in-process store.
async fn watcher_and_writer() -> [(Store, Store); 2] {
    let url = redis_url();
    let connect = || Store::connect_redis(&url, StoreAuth::Required);
    let memory = Store::memory();
    [(connect().await.expect("redis"), connect().await.expect("redis")), (memory.clone(), memory)]
}

#[tokio::test]
async fn a_write_of_the_run_wakes_its_watch_and_another_runs_does_not() {
    for (watcher, writer) in watcher_and_writer().await {
        let (run, other) = (unique("run"), unique("run"));
        let watch = watcher.watch(&run);
        // Let the watcher's subscription be made (it is made by the first watch).
        tokio::time::sleep(Duration::from_millis(300)).await;

        let notice = watch.next_notice();
        writer.append_event(&other, "t", EventKind::Messages, json!({})).await.expect("append");
        assert!(tokio::time::timeout(Duration::from_millis(700), notice).await.is_err(), "another run's event woke it");

        for write in ["event", "cancel", "end"] {
            let notice = watch.next_notice();
            match write {
                "event" => drop(writer.append_event(&run, "t", EventKind::Messages, json!({})).await.expect("append")),
                "cancel" => writer.request_cancel(&run).await.expect("cancel"),
                _ => {
                    let result = serde_json::from_value(json!({"status": "completed", "output": "", "run_id": run}))
                        .expect("result");
                    assert!(writer.finish_run(&run, "t", &[], &result).await.expect("finish"));
                }
            }
            tokio::time::timeout(Duration::from_secs(5), notice)
                .await
                .unwrap_or_else(|_| panic!("the run's {write} did not wake its watch"));
        }
    }
}

#[tokio::test]
async fn a_runner_on_the_store_socket_is_told_of_its_cancel() {
    let store = Store::memory();
    let dir = tempfile::TempDir::new().expect("dir");
    let path = dir.path().join("store.sock");
    let listener = yuxi_operator::store::socket::bind_store_socket(&path).await.expect("bind");
    tokio::spawn(yuxi_operator::store::socket::serve_store_socket(listener, store.clone()));
    let client = RunnerStoreClient::connect_socket(&path).await.expect("connects");
    let run = unique("run");
    // A poll far longer than the test: only the pushed answer can end the wait in time.
    let waiting = tokio::spawn({
        let (client, run) = (client.clone(), run.clone());
        async move { client.cancelled(&run, Duration::from_secs(3600)).await }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The runner's other requests do not wait behind it.
    assert!(!client.is_cancel_requested(&run).await.expect("asks"));
    assert!(!waiting.is_finished());
    store.request_cancel(&run).await.expect("cancel");
    tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("told at once").expect("the wait");
}

#[tokio::test]
async fn a_runner_on_redis_is_told_of_its_cancel_through_its_own_channel_alone() {
    let url = redis_url();
    let client = RunnerStoreClient::connect_redis(&url, StoreAuth::Required).await.expect("redis");
    let facade = Store::connect_redis(&url, StoreAuth::Required).await.expect("redis");
    let observer = redis::Client::open(url.as_str()).expect("url");
    let observer = observer.get_multiplexed_async_connection().await.expect("connects");
    let run = unique("run");
    let channel = format!("yuxi:run:{run}:cancel");
    let subscribers = |mut connection: redis::aio::MultiplexedConnection, channel: String| async move {
        let counts: Vec<(String, i64)> =
            redis::cmd("PUBSUB").arg("NUMSUB").arg(&channel).query_async(&mut connection).await.expect("numsub");
        counts[0].1
    };
    let waiting = tokio::spawn({
        let (client, run) = (client.clone(), run.clone());
        async move { client.cancelled(&run, Duration::from_secs(3600)).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        subscribers(observer.clone(), channel.clone()).await,
        1,
        "the runner listens on its run's cancel channel"
    );
    // Another run's writes are not sent to it: it holds no pattern subscription.
    facade.request_cancel(&unique("run")).await.expect("cancel");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "another run's cancel ended the wait");
    facade.request_cancel(&run).await.expect("cancel");
    tokio::time::timeout(Duration::from_secs(5), waiting).await.expect("told at once").expect("the wait");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(subscribers(observer, channel).await, 0, "the subscription ends with the wait");
}
