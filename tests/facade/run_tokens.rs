//! Run credentials as the facade checks them, with the run store in a real Redis (with its password, as
//! `make test` starts it): a token is believed only when the facade's key signed it, it has not expired,
//! and its run is still going. Nothing written into the store makes one.

use serde_json::{Value, json};
use yuxi_operator::access::Role;
use yuxi_operator::facade::http::auth::UserEntry;
use yuxi_operator::facade::services::launch::{ClusterLauncher, Launcher};
use yuxi_operator::facade::{AgentCatalog, FacadeParts, FacadeState, Runs, Users, router};
use yuxi_operator::resources::ParentRef;
use yuxi_operator::run::grant::{TokenKey, token_digest};
use yuxi_operator::run::{RunGrant, RunRecord, RunStatus};
use yuxi_operator::store::{Store, StoreAuth};

use crate::support::api_server::scripted::api_server;
use crate::support::examples::example_agents;
use crate::support::redis::{redis_url, unique};

fn key() -> TokenKey {
    TokenKey::new(b"the facade's own key, 32 bytes!!").expect("key")
}

struct Facade {
    base: String,
    store: Store,
}

/// A facade over the example agents, Alice's user token, the test Redis, and [`key`].
async fn facade() -> Facade {
    let store = Store::connect_redis(&redis_url(), StoreAuth::Required).await.expect("the test Redis");
    let (client, _server) = api_server(vec![]);
    let users = Users::new(vec![UserEntry {
        token: "alice-token".into(),
        uid: "alice".into(),
        role: Role::User,
        department_id: Some(1),
        username: None,
        password_hash: None,
    }])
    .expect("users");
    let notes: yuxi_operator::resources::KnowledgeBase = serde_norway::from_str(
        "apiVersion: yuxi.dev/v1alpha1\nkind: KnowledgeBase\nmetadata: {name: notes}\nspec: {source: {documents: {}}, share: {readScope: {accessLevel: Global}}}",
    )
    .expect("a knowledge base");
    let documents = std::env::temp_dir().join(unique("knowledge"));
    let knowledge = yuxi_operator::facade::services::knowledge::Knowledge::new(
        yuxi_operator::facade::services::catalog::KnowledgeCatalog::new(vec![notes]),
        yuxi_operator::facade::services::knowledge::KnowledgeSettings {
            documents_dir: documents.clone(),
            index_dir: None,
            sources_dir: None,
        },
        yuxi_operator::facade::services::knowledge::PlatformObjects::local(documents, Vec::new()),
        None,
    );
    let state: FacadeState = FacadeParts {
        run_tokens: key(),
        knowledge: Some(std::sync::Arc::new(knowledge)),
        ..FacadeParts::new(
            users.into(),
            AgentCatalog::new(example_agents()),
            Some(Runs { store: store.clone(), launcher: Launcher::Cluster(ClusterLauncher::new(client, "team-a")) }),
        )
    }
    .into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router(state)).await.expect("serves") });
    Facade { base: format!("http://{addr}"), store }
}

impl Facade {
    /// `subagent_status` of `run_id` with `token`: the status code and the body.
    async fn status_of(&self, token: &str, run_id: &str) -> (u16, Value) {
        let response = reqwest12::Client::new()
            .post(format!("{}/api/tools/subagent_status", self.base))
            .bearer_auth(token)
            .json(&json!({"parent": {}, "run_id": run_id}))
            .send()
            .await
            .expect("reaches the facade");
        let status = response.status().as_u16();
        (status, response.json().await.expect("a JSON answer"))
    }

    /// A run of `uid` in `status`, with `parent` when given; its id and thread.
    async fn run(&self, uid: &str, status: RunStatus, parent: Option<&RunGrant>) -> RunGrant {
        let run_id = unique("run");
        let thread_id = match parent {
            Some(p) => format!("{}_sub_research-explorer_0000abcd", p.thread_id),
            None => unique("thread"),
        };
        let record = RunRecord {
            run_id: run_id.clone(),
            thread_id: thread_id.clone(),
            agent_slug: if parent.is_some() { "research-explorer" } else { "deep-research" }.into(),
            uid: uid.into(),
            parent: parent.map(|p| ParentRef {
                run_id: p.run_id.clone(),
                thread_id: p.thread_id.clone(),
                agent: p.agent.clone(),
                ..ParentRef::default()
            }),
            status: RunStatus::Pending,
            error: None,
            created_at: "2026-12-01T10:00:00Z".into(),
            request: Default::default(),
            max_tokens: None,
            waiting: None,
            approvals: Vec::new(),
            ended_at: None,
            principal: None,
        };
        self.store.create_run(&record, None, Default::default()).await.expect("created");
        if status != RunStatus::Pending {
            self.store.set_run_status(&run_id, status, None).await.expect("status");
        }
        RunGrant {
            file_thread_id: thread_id.clone(),
            run_id,
            thread_id,
            agent: "deep-research".into(),
            uid: uid.into(),
            role: Role::User,
            department_id: Some(1),
        }
    }
}

fn in_an_hour() -> i64 {
    jiff::Timestamp::now().as_second() + 3600
}

#[tokio::test]
async fn a_grant_written_straight_into_redis_is_worth_nothing() {
    let facade = facade().await;
    let parent = facade.run("alice", RunStatus::Running, None).await;
    let child = facade.run("alice", RunStatus::Running, Some(&parent)).await;
    // What the store used to believe: a grant under the digest of a token anybody can make up.
    let made_up = format!("yxr_{}", "ab".repeat(32));
    let forged = json!({"run_id": parent.run_id, "thread_id": parent.thread_id, "file_thread_id": parent.thread_id,
                        "agent": "deep-research", "uid": "alice", "role": "superadmin", "department_id": null});
    let mut redis = redis::Client::open(redis_url()).expect("url").get_multiplexed_async_connection().await.expect("c");
    let () = redis::AsyncCommands::set_ex(
        &mut redis,
        format!("yuxi:run-grant:{}", token_digest(&made_up)),
        forged.to_string(),
        600,
    )
    .await
    .expect("written");
    let (status, body) = facade.status_of(&made_up, &child.run_id).await;
    assert_eq!(status, 401, "{body}");
    // A token of the right shape signed with another key, for the same grant, is refused too.
    let other = TokenKey::new(&[9; 32]).expect("key").sign(&parent, in_an_hour());
    assert_eq!(facade.status_of(&other, &child.run_id).await.0, 401);
    // A changed payload under a real signature is refused.
    let real = key().sign(&parent, in_an_hour());
    let (payload, signature) = real.trim_start_matches("yxr_").split_once('.').expect("two parts");
    let mut bytes = payload.as_bytes().to_vec();
    bytes[5] ^= 1;
    let tampered = format!("yxr_{}.{signature}", String::from_utf8(bytes).expect("ascii"));
    assert_eq!(facade.status_of(&tampered, &child.run_id).await.0, 401);
    // The facade's own token for the parent is believed and sees its child.
    let (status, body) = facade.status_of(&real, &child.run_id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["run_id"], child.run_id.as_str());
}

#[tokio::test]
async fn an_expired_or_revoked_token_is_refused() {
    let facade = facade().await;
    let parent = facade.run("alice", RunStatus::Running, None).await;
    let child = facade.run("alice", RunStatus::Running, Some(&parent)).await;
    let expired = key().sign(&parent, jiff::Timestamp::now().as_second() - 1);
    let (status, body) = facade.status_of(&expired, &child.run_id).await;
    assert_eq!(status, 401, "{body}");
    let token = key().sign(&parent, in_an_hour());
    assert_eq!(facade.status_of(&token, &child.run_id).await.0, 200);
    // The run ends: its token stops working at once, though it has not expired.
    facade.store.set_run_status(&parent.run_id, RunStatus::Completed, None).await.expect("ended");
    let (status, body) = facade.status_of(&token, &child.run_id).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["message"], "the run token is not valid (or its run has ended)");
    // A token for a run the store does not know is refused the same way.
    let mut unknown = parent.clone();
    unknown.run_id = unique("run");
    assert_eq!(facade.status_of(&key().sign(&unknown, in_an_hour()), &child.run_id).await.0, 401);
    // And a grant whose user is not the run's (a signed token never says so, but the record decides).
    let mut other_user = facade.run("alice", RunStatus::Running, None).await;
    other_user.uid = "bob".into();
    assert_eq!(facade.status_of(&key().sign(&other_user, in_an_hour()), &child.run_id).await.0, 401);
}

#[tokio::test]
async fn a_run_token_cannot_act_for_another_run() {
    let facade = facade().await;
    let first = facade.run("alice", RunStatus::Running, None).await;
    let second = facade.run("alice", RunStatus::Running, None).await;
    let child_of_second = facade.run("alice", RunStatus::Running, Some(&second)).await;
    let first_token = key().sign(&first, in_an_hour());
    // Same user, another parent: the child answers as a run that does not exist.
    let (status, body) = facade.status_of(&first_token, &child_of_second.run_id).await;
    assert_eq!(status, 404, "{body}");
    let missing = facade.status_of(&first_token, &unique("run")).await;
    assert_eq!((status, &body["code"]), (missing.0, &missing.1["code"]), "a stranger's run answers as a missing one");
    // Naming the other parent in the body changes nothing: the grant names the parent.
    let response = reqwest12::Client::new()
        .post(format!("{}/api/tools/subagent_status", facade.base))
        .bearer_auth(&first_token)
        .json(&json!({"parent": {"agent": "deep-research", "run_id": second.run_id, "thread_id": second.thread_id},
                      "run_id": child_of_second.run_id}))
        .send()
        .await
        .expect("reaches");
    assert_eq!(response.status().as_u16(), 404);
    assert_eq!(facade.status_of(&key().sign(&second, in_an_hour()), &child_of_second.run_id).await.0, 200);
}

#[tokio::test]
async fn a_run_token_searches_for_its_own_agent_only_and_not_after_its_run() {
    let facade = facade().await;
    let run = facade.run("alice", RunStatus::Running, None).await;
    let token = key().sign(&run, in_an_hour());
    let search = |agent: &'static str| {
        let (base, token) = (facade.base.clone(), token.clone());
        async move {
            let response = reqwest12::Client::new()
                .post(format!("{base}/api/tools/knowledge_search"))
                .bearer_auth(token)
                .json(&json!({"agent": agent, "query": "anything"}))
                .send()
                .await
                .expect("reaches the facade");
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.expect("a JSON answer"))
        }
    };
    let (status, own) = search("deep-research").await;
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["errors"], json!([]), "{own}");
    let (status, other) = search("research-explorer").await;
    assert_eq!((status, other["field"].as_str()), (422, Some("agent")), "{other}");
    facade.store.set_run_status(&run.run_id, RunStatus::Completed, None).await.expect("ended");
    let (status, _) = search("deep-research").await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn a_run_token_acts_as_its_run_over_mcp_as_over_http() {
    let facade = facade().await;
    let parent = facade.run("alice", RunStatus::Running, None).await;
    let child = facade.run("alice", RunStatus::Running, Some(&parent)).await;
    let another = facade.run("alice", RunStatus::Running, None).await;
    let others_child = facade.run("alice", RunStatus::Running, Some(&another)).await;
    let token = key().sign(&parent, in_an_hour());
    crate::support::mcp_client::scenario(
        "run_token",
        &facade.base,
        &[
            ("RUN_TOKEN", &token),
            ("RUN_ID", &parent.run_id),
            ("CHILD_RUN_ID", &child.run_id),
            ("OTHER_RUN_ID", &others_child.run_id),
        ],
    )
    .await;
}

#[tokio::test]
async fn a_pending_run_calling_with_its_own_token_is_recorded_running() {
    let facade = facade().await;
    // In a cluster the controller records a run running once its pod is reported so; a fast runner's
    // first call comes sooner, and proves the run executes.
    let pending = facade.run("alice", RunStatus::Pending, None).await;
    let start = |token: String| {
        let base = facade.base.clone();
        async move {
            reqwest12::Client::new()
                .post(format!("{base}/api/tools/subagent_start"))
                .bearer_auth(token)
                .json(&json!({"parent": {"tool_call_id": "call_0"}, "subagent_slug": "research-explorer", "description": "look"}))
                .send()
                .await
                .expect("reaches")
        }
    };
    let answer = start(key().sign(&pending, in_an_hour())).await;
    let body: Value = answer.json().await.expect("JSON");
    assert!(!body.to_string().contains("is pending"), "{body}");
    let record = facade.store.run_record(&pending.run_id).await.expect("read").expect("the run");
    assert_eq!(record.status, RunStatus::Running, "its own call records it running");
}
