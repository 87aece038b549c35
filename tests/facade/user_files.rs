//! The users' files served by the facade as it runs in a cluster: its runs are AgentRuns (it has no data
//! folder of its own), the conversations are in Redis, and the users' volume the sandbox pods write is
//! mounted read-only at `--user-data-dir`. The viewer reads a conversation's scopes there, a stranger's
//! conversation answers as a missing one, and a facade given no volume answers 503.

use std::os::unix::fs::symlink;
use std::path::Path;

use serde_json::Value;
use yuxi_operator::access::Role;
use yuxi_operator::facade::http::auth::UserEntry;
use yuxi_operator::facade::services::launch::{ClusterLauncher, Launcher};
use yuxi_operator::facade::{AgentCatalog, FacadeParts, FacadeState, Runs, Users, router};
use yuxi_operator::run::conversation::Conversation;
use yuxi_operator::store::{Store, StoreAuth};

use crate::support::api_server::scripted::api_server;
use crate::support::examples::example_agents;
use crate::support::redis::{redis_url, unique};

fn user(uid: &str) -> UserEntry {
    UserEntry {
        token: format!("{uid}-token"),
        uid: uid.into(),
        role: Role::User,
        department_id: None,
        username: None,
        password_hash: None,
    }
}

/// A cluster's facade over the test Redis, reading the users' files from `user_data` (none when
/// `None`); its base URL and its store.
async fn facade(user_data: Option<&Path>) -> (String, Store) {
    let store = Store::connect_redis(&redis_url(), StoreAuth::Required).await.expect("the test Redis");
    let (client, _server) = api_server(vec![]);
    let state: FacadeState = FacadeParts {
        user_files: user_data.map(Path::to_path_buf),
        ..FacadeParts::new(
            Users::new(vec![user("alice"), user("bob")]).expect("users").into(),
            AgentCatalog::new(example_agents()),
            Some(Runs { store: store.clone(), launcher: Launcher::Cluster(ClusterLauncher::new(client, "team-a")) }),
        )
    }
    .into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router(state)).await.expect("serves") });
    (format!("http://{addr}"), store)
}

async fn get(url: &str, token: &str) -> (u16, Value) {
    let response = reqwest12::Client::new().get(url).bearer_auth(token).send().await.expect("reaches the facade");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_clusters_facade_reads_the_conversations_files_from_the_mounted_volume() {
    let volume = tempfile::tempdir().expect("dir");
    let (base, store) = facade(Some(volume.path())).await;
    let thread = unique("t-files");
    let now = jiff::Timestamp::now().to_string();
    store
        .put_conversation(&Conversation {
            thread_id: thread.clone(),
            uid: "alice".into(),
            agent_slug: "deep-research".into(),
            title: "a report".into(),
            is_pinned: false,
            metadata: Default::default(),
            created_at: now.clone(),
            updated_at: now,
            last_run_id: None,
            viewed_run_id: None,
            queue_paused: false,
        })
        .await
        .expect("stored");
    // As a sandbox pod leaves it on the volume: the report, and a link a run made to the volume's root.
    let outputs = volume.path().join(format!("users/alice/threads/{thread}/outputs"));
    std::fs::create_dir_all(&outputs).expect("folders");
    std::fs::write(outputs.join("report.md"), "# Report\n").expect("write");
    symlink("../../../../..", outputs.join("root")).expect("link");

    let viewer =
        |route: &str, path: &str| format!("{base}/api/viewer/filesystem/{route}?thread_id={thread}&path={path}");
    let (status, body) = get(&viewer("tree", "/outputs/"), "alice-token").await;
    assert_eq!(status, 200, "{body}");
    let paths: Vec<_> = body["entries"].as_array().expect("entries").iter().map(|e| e["path"].clone()).collect();
    assert_eq!(paths, ["/outputs/report.md"]);
    let (status, body) = get(&viewer("file", "/outputs/report.md"), "alice-token").await;
    assert_eq!(
        (status, body["content"].as_str(), body["preview_type"].as_str()),
        (200, Some("# Report\n"), Some("markdown"))
    );
    let (status, _) = get(&viewer("file", "/outputs/root/users/alice/threads/x"), "alice-token").await;
    assert_eq!(status, 404);
    // The uploads folder no run has written yet is empty; the workspace too.
    let (status, body) = get(&viewer("tree", "/uploads/"), "alice-token").await;
    assert_eq!((status, body["entries"].as_array().map(Vec::len)), (200, Some(0)));
    let (status, body) = get(&format!("{base}/api/workspace/tree?path=/"), "alice-token").await;
    assert_eq!((status, body["entries"].as_array().map(Vec::len)), (200, Some(0)));
    // Bob is told what he would be told of a thread that never was.
    let (status, body) = get(&viewer("file", "/outputs/report.md"), "bob-token").await;
    assert_eq!((status, body["message"].as_str()), (404, Some(format!("thread {thread:?} does not exist").as_str())));

    // A facade given no volume says so.
    let (base, _) = facade(None).await;
    let (status, body) = get(&format!("{base}/api/workspace/tree?path=/"), "alice-token").await;
    assert_eq!(status, 503, "{body}");
    assert!(body["message"].as_str().expect("a message").contains("--user-data-dir"), "{body}");
}
