//! The facade as it runs in a cluster (`yuxi-operator api`), over real HTTP, with the Kubernetes API
//! server stood in for by kube's mock service: tokens checked by TokenReview, the Agents of the namespace
//! read and written through the API (its refusals answered as 4xx naming the field), runs created as
//! AgentRuns.

use http::Method;
use serde_json::{Value, json};
use yuxi_operator::facade::http::auth::{GroupMapping, TokenReviewer};
use yuxi_operator::facade::http::metrics::FacadeMetrics;
use yuxi_operator::facade::services::catalog::ClusterCatalog;
use yuxi_operator::facade::services::launch::{ClusterLauncher, Launcher};
use yuxi_operator::facade::{AgentCatalog, FacadeParts, FacadeState, Runs, router};
use yuxi_operator::run::grant::TokenKey;
use yuxi_operator::store::Store;

use crate::support::api_server::scripted::{Exchange, api_server, failure};

const AGENTS: &str = "/apis/yuxi.dev/v1alpha1/namespaces/team-a/agents";
const REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews?";

/// The key the test facades sign run tokens with.
fn token_key() -> TokenKey {
    TokenKey::new(&[7; 32]).expect("a 32-byte key")
}

/// The facade of namespace `team-a` through `client`, with `store` as its run store and [`token_key`];
/// its base URL.
async fn facade(client: kube::Client, store: Store) -> String {
    facade_with(client, store, Default::default()).await
}

/// [`facade`], counting in `metrics`.
async fn facade_with(client: kube::Client, store: Store, metrics: FacadeMetrics) -> String {
    let reviewer = TokenReviewer::new(client.clone(), vec![], GroupMapping::default(), metrics.token_reviews());
    let state: FacadeState = FacadeParts {
        metrics,
        run_tokens: token_key(),
        ..FacadeParts::new(
            reviewer.into(),
            AgentCatalog::Cluster(Box::new(ClusterCatalog::new(client.clone(), "team-a"))),
            Some(Runs { store, launcher: Launcher::Cluster(ClusterLauncher::new(client, "team-a")) }),
        )
    }
    .into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router(state)).await.expect("serves") });
    format!("http://{addr}")
}

/// The TokenReview exchange for a token of `username` in `groups`.
fn review(username: &str, groups: &[&str]) -> Exchange {
    Exchange::new(
        Method::POST,
        REVIEWS,
        201,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {},
               "spec": {}, "status": {"authenticated": true,
               "user": {"username": username, "uid": "5f1c", "groups": groups}}}),
    )
}

fn agent(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
           "metadata": {"name": name, "namespace": "team-a", "resourceVersion": "7", "uid": format!("uid-{name}")},
           "spec": spec})
}

fn listing(items: Vec<Value>) -> Exchange {
    Exchange::new(
        Method::GET,
        &format!("{AGENTS}?&limit=500"),
        200,
        json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentList", "metadata": {"resourceVersion": "90"}, "items": items}),
    )
}

fn global() -> Value {
    json!({"readScope": {"accessLevel": "Global"}})
}

async fn call(base: &str, method: &str, path: &str, token: &str, body: Option<Value>) -> (u16, Value) {
    let client = reqwest12::Client::new();
    let mut request = client.request(method.parse().expect("method"), format!("{base}{path}")).bearer_auth(token);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.expect("reaches the facade");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("JSON") })
}

#[tokio::test]
async fn a_reviewed_token_lists_the_namespace_agents_it_may_see_with_the_builtin() {
    let explorer =
        agent("research-explorer", json!({"backend": "SubAgentBackend", "isSubagent": true, "share": global()}));
    let private = agent(
        "bob-notes",
        json!({"backend": "ChatbotAgent", "owner": "bob", "share": {"readScope": {"accessLevel": "User", "userUids": ["bob"]}}}),
    );
    let (client, server) = api_server(vec![
        review("alice@example.com", &["system:authenticated", "yuxi:department:1"]),
        listing(vec![explorer, private]),
    ]);
    let base = facade(client, Store::memory()).await;
    let (status, body) = call(&base, "GET", "/api/agent?include_subagents=true", "alice-oidc-token", None).await;
    let bodies = server.await.expect("the API server saw both requests");
    assert_eq!(status, 200, "{body}");
    let slugs: Vec<&str> =
        body["agents"].as_array().expect("agents").iter().map(|a| a["slug"].as_str().expect("slug")).collect();
    assert_eq!(slugs, ["general-purpose", "research-explorer"]);
    assert_eq!(bodies[0]["spec"]["token"], "alice-oidc-token");
    assert_eq!(bodies[0]["kind"], "TokenReview");
}

#[tokio::test]
async fn a_token_the_api_server_does_not_authenticate_is_401_and_its_review_is_remembered() {
    let refused = Exchange::new(
        Method::POST,
        REVIEWS,
        201,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {}, "spec": {},
               "status": {"authenticated": false, "error": "token has expired"}}),
    );
    let (client, server) = api_server(vec![refused]);
    let base = facade(client, Store::memory()).await;
    assert_eq!(call(&base, "GET", "/api/agent", "stale-token", None).await.0, 401);
    server.await.expect("one review");
    // The API server is gone now: a second review would fail with 503, the remembered one answers 401.
    assert_eq!(call(&base, "GET", "/api/agent", "stale-token", None).await.0, 401);
}

#[tokio::test]
async fn tokens_are_reviewed_for_the_facades_own_audience_and_every_outcome_is_counted() {
    let other_audience = Exchange::new(
        Method::POST,
        REVIEWS,
        201,
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {}, "spec": {},
               "status": {"authenticated": true, "audiences": ["https://kubernetes.default.svc"],
                          "user": {"username": "mallory", "groups": []}}}),
    );
    let (client, server) = api_server(vec![review("alice", &[]), listing(vec![]), other_audience]);
    let metrics = FacadeMetrics::default();
    let base = facade_with(client, Store::memory(), metrics.clone()).await;
    assert_eq!(call(&base, "GET", "/api/agent", "alice-token", None).await.0, 200);
    assert_eq!(call(&base, "GET", "/api/agent/runs/r-1", "alice-token", None).await.0, 404, "cached: no second review");
    // A status that names an audience other than the facade's is not believed.
    assert_eq!(call(&base, "GET", "/api/agent", "a-token-for-the-api-server", None).await.0, 401);
    let bodies = server.await.expect("two reviews and one listing");
    assert_eq!(bodies[0]["spec"]["audiences"], json!(["yuxi-operator"]));
    assert_eq!(bodies[2]["spec"]["audiences"], json!(["yuxi-operator"]));
    let text = reqwest12::get(format!("{base}/metrics")).await.expect("metrics").text().await.expect("text");
    for line in [
        r#"yuxi_token_reviews_total{result="authenticated"} 1"#,
        r#"yuxi_token_reviews_total{result="cached"} 1"#,
        r#"yuxi_token_reviews_total{result="unauthenticated"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
    }
}

#[tokio::test]
async fn a_flood_of_random_tokens_does_not_push_a_users_review_out_of_the_cache() {
    use crate::support::api_server::routed::{Answer, routed};
    let (client, seen) = routed(|request, _| {
        let token = request.body["spec"]["token"].as_str().unwrap_or_default();
        let status = match token {
            "alice-token" => json!({"authenticated": true, "user": {"username": "alice", "groups": []}}),
            _ => json!({"authenticated": false}),
        };
        Answer::Json(
            201,
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "metadata": {},
                                 "spec": {}, "status": status}),
        )
    });
    let reviewer = TokenReviewer::with_capacity(client, vec![], GroupMapping::default(), Default::default(), 64);
    for _ in 0..20 {
        assert_eq!(reviewer.identify("alice-token").await.expect("reviewed").map(|who| who.uid), Some("alice".into()));
    }
    for n in 0..1000 {
        assert_eq!(reviewer.identify(&format!("random-{n}")).await.expect("reviewed"), None);
    }
    assert!(reviewer.identify("alice-token").await.expect("reviewed").is_some());
    let reviews_of_alice =
        seen.lock().expect("log").iter().filter(|request| request.body["spec"]["token"] == "alice-token").count();
    assert_eq!(reviews_of_alice, 1, "alice's review was pushed out by the flood and asked again");
}

#[tokio::test]
async fn an_unreachable_api_server_is_503_not_401() {
    let (client, server) = api_server(vec![]);
    server.await.expect("no exchange");
    let base = facade(client, Store::memory()).await;
    let (status, body) = call(&base, "GET", "/api/agent", "any-token", None).await;
    assert_eq!(status, 503, "{body}");
    assert!(body["message"].as_str().expect("message").contains("TokenReview"), "{body}");
}

#[tokio::test]
async fn set_default_clears_the_old_default_before_setting_the_new_one() {
    let main = json!({"backend": "ChatbotAgent", "isSubagent": false, "default": true, "share": global()});
    let helpdesk = json!({"backend": "ChatbotAgent", "isSubagent": false, "share": global()});
    let mut cleared = main.clone();
    cleared.as_object_mut().expect("spec").remove("default");
    let mut made = helpdesk.clone();
    made["default"] = json!(true);
    let (client, server) = api_server(vec![
        review("ops", &["yuxi:admins"]),
        listing(vec![agent("main", main), agent("helpdesk", helpdesk)]),
        Exchange::new(
            Method::PUT,
            &format!("{AGENTS}/main?&fieldManager=yuxi-operator-api"),
            200,
            agent("main", cleared),
        ),
        Exchange::new(
            Method::PUT,
            &format!("{AGENTS}/helpdesk?&fieldManager=yuxi-operator-api"),
            200,
            agent("helpdesk", made),
        ),
    ]);
    let base = facade(client, Store::memory()).await;
    let (status, body) = call(&base, "POST", "/api/agent/helpdesk/set_default", "ops-token", None).await;
    let bodies = server.await.expect("the whole script");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["agent"]["is_default"], true);
    assert!(bodies[2]["spec"].get("default").is_none(), "the old default is cleared first: {}", bodies[2]);
    assert_eq!(bodies[2]["metadata"]["annotations"]["yuxi.dev/updated-by"], "ops");
    assert_eq!(bodies[3]["spec"]["default"], true);
}

#[tokio::test]
async fn in_a_cluster_the_password_login_route_is_404() {
    let (client, server) = api_server(vec![]);
    server.await.expect("no exchange");
    let base = facade(client, Store::memory()).await;
    let response = reqwest12::Client::new()
        .post(format!("{base}/api/auth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("username=alice&password=whatever-it-is")
        .send()
        .await
        .expect("reaches the facade");
    assert_eq!(response.status(), 404);
}

#[tokio::test]
async fn a_create_that_loses_the_slug_to_another_takes_the_next_one() {
    let (client, server) = api_server(vec![
        review("alice", &["yuxi:department:1"]),
        listing(vec![]),
        Exchange::new(
            Method::POST,
            &format!("{AGENTS}?&fieldManager=yuxi-operator-api"),
            409,
            failure(409, "AlreadyExists", "agents.yuxi.dev \"notes\" already exists"),
        ),
        listing(vec![agent("notes", json!({"backend": "ChatbotAgent", "owner": "carol"}))]),
        Exchange::new(
            Method::POST,
            &format!("{AGENTS}?&fieldManager=yuxi-operator-api"),
            201,
            agent(
                "notes-2",
                json!({"backend": "ChatbotAgent", "isSubagent": false, "displayName": "Notes", "owner": "alice"}),
            ),
        ),
    ]);
    let base = facade(client, Store::memory()).await;
    let (status, body) = call(&base, "POST", "/api/agent", "alice-token", Some(json!({"name": "Notes"}))).await;
    let bodies = server.await.expect("the whole script");
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["agent"]["slug"], "notes-2");
    assert_eq!(bodies[2]["metadata"]["name"], "notes");
    assert_eq!(bodies[4]["metadata"]["name"], "notes-2");
    assert_eq!(bodies[4]["spec"]["owner"], "alice");
    assert_eq!(bodies[4]["spec"]["share"]["readScope"], json!({"accessLevel": "User", "userUids": ["alice"]}));
}

#[tokio::test]
async fn a_webhook_denial_is_422_naming_the_yuxi_field() {
    let message = "admission webhook \"agents.yuxi.dev\" denied the request: spec.default: agent \"main\" is already the default of namespace team-a";
    let (client, server) = api_server(vec![
        review("ops", &["yuxi:admins"]),
        listing(vec![]),
        Exchange::new(
            Method::POST,
            &format!("{AGENTS}?&fieldManager=yuxi-operator-api"),
            403,
            failure(403, "Forbidden", message),
        ),
    ]);
    let base = facade(client, Store::memory()).await;
    let (status, body) =
        call(&base, "POST", "/api/agent", "ops-token", Some(json!({"name": "Chat", "set_default": true}))).await;
    server.await.expect("the whole script");
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["field"], "is_default");
    assert!(body["message"].as_str().expect("message").contains("already the default"), "{body}");
}

#[tokio::test]
async fn an_update_over_a_newer_version_is_409_and_sends_the_version_it_read() {
    let mine = agent("notes", json!({"backend": "ChatbotAgent", "isSubagent": false, "owner": "alice"}));
    let (client, server) = api_server(vec![
        review("alice", &[]),
        listing(vec![mine]),
        Exchange::new(
            Method::PUT,
            &format!("{AGENTS}/notes?&fieldManager=yuxi-operator-api"),
            409,
            failure(
                409,
                "Conflict",
                "Operation cannot be fulfilled on agents.yuxi.dev \"notes\": the object has been modified",
            ),
        ),
    ]);
    let base = facade(client, Store::memory()).await;
    let (status, body) =
        call(&base, "PUT", "/api/agent/notes", "alice-token", Some(json!({"description": "new"}))).await;
    let bodies = server.await.expect("the whole script");
    assert_eq!(status, 409, "{body}");
    assert!(body["message"].as_str().expect("message").contains("changed by somebody else"), "{body}");
    assert_eq!(bodies[2]["metadata"]["resourceVersion"], "7");
    assert_eq!(bodies[2]["spec"]["description"], "new");
}

#[tokio::test]
async fn a_subagent_start_creates_an_agent_run_labelled_with_its_agent_and_parent() {
    let parent = agent(
        "deep-research",
        json!({"backend": "ChatbotAgent", "isSubagent": false, "share": global(),
                                               "context": {"subagents": ["research-explorer"]}}),
    );
    let explorer =
        agent("research-explorer", json!({"backend": "SubAgentBackend", "isSubagent": true, "share": global()}));
    let created = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "metadata": {"name": "x", "namespace": "team-a"},
                         "spec": {"agent": "research-explorer", "input": "find"}});
    let (client, server) = api_server(vec![
        review("system:serviceaccount:team-a:chat", &[]),
        listing(vec![parent, explorer]),
        Exchange::new(
            Method::POST,
            "/apis/yuxi.dev/v1alpha1/namespaces/team-a/agentruns?&fieldManager=yuxi-operator-api",
            201,
            created,
        ),
        // The child's own credentials, for its knowledge bases (it delegates to nobody).
        Exchange::new(
            Method::POST,
            "/api/v1/namespaces/team-a/secrets?&fieldManager=yuxi-operator-api",
            201,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x-credentials"}}),
        ),
    ]);
    let store = Store::memory();
    let base = facade(client, store.clone()).await;
    let start = json!({"parent": {"agent": "deep-research", "run_id": "parent-run", "thread_id": "t1", "tool_call_id": "call-1"},
                       "description": "find sources", "subagent_slug": "research-explorer"});
    let (status, body) = call(&base, "POST", "/api/tools/subagent_start", "sa-token", Some(start)).await;
    let bodies = server.await.expect("the whole script");
    assert_eq!((status, body["status"].as_str()), (200, Some("started")), "{body}");
    let run = &bodies[2];
    assert_eq!(run["metadata"]["name"], body["run_id"]);
    let uid = run["spec"]["uid"].as_str().expect("uid");
    assert!(uid.starts_with("system-serviceaccount-team-a-chat-"), "{uid}");
    // A parent outside the system is kept under the caller's own id for its name.
    let parent_run = yuxi_operator::delegation::outside_parent_run_id(uid, "parent-run");
    assert_eq!(
        run["metadata"]["labels"],
        json!({"yuxi.dev/agent": "research-explorer", "yuxi.dev/parent-run": parent_run})
    );
    assert_eq!(body["created_by_run_id"], json!(parent_run));
    assert_eq!(run["spec"]["input"], "find sources");
    assert_eq!(run["spec"]["threadId"], body["thread_id"]);
    assert_eq!(run["spec"]["parent"]["toolCallId"], "call-1");
    let record = store.run_record(body["run_id"].as_str().expect("run id")).await.expect("store").expect("recorded");
    assert_eq!(record.uid, uid);
    let announced = format!("{}-credentials", body["run_id"].as_str().expect("id"));
    assert_eq!(run["metadata"]["annotations"]["yuxi.dev/run-credentials"], announced.as_str());
    assert_eq!(bodies[3]["type"], "yuxi.dev/run-credentials");
}

#[tokio::test]
async fn a_run_whose_agent_run_cannot_be_created_is_recorded_failed_with_the_reason() {
    let explorer =
        agent("research-explorer", json!({"backend": "SubAgentBackend", "isSubagent": true, "share": global()}));
    let parent = agent("chat", json!({"backend": "ChatbotAgent", "isSubagent": false, "share": global()}));
    let (client, server) = api_server(vec![
        review("alice", &[]),
        listing(vec![parent, explorer]),
        Exchange::new(
            Method::POST,
            "/apis/yuxi.dev/v1alpha1/namespaces/team-a/agentruns?&fieldManager=yuxi-operator-api",
            403,
            failure(
                403,
                "Forbidden",
                "agentruns.yuxi.dev is forbidden: exceeded quota: runs, requested: count/agentruns.yuxi.dev=1",
            ),
        ),
    ]);
    let store = Store::memory();
    let base = facade(client, store.clone()).await;
    let start = json!({"parent": {"agent": "chat", "run_id": "p1", "thread_id": "t1"},
                       "description": "x", "subagent_slug": "research-explorer"});
    let (status, body) = call(&base, "POST", "/api/tools/subagent_start", "alice-token", Some(start)).await;
    server.await.expect("the whole script");
    assert_eq!(status, 200, "{body}");
    let run_id = body["run_id"].as_str().expect("run id");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let record = loop {
        let record = store.run_record(run_id).await.expect("store").expect("recorded");
        if record.status.is_terminal() || std::time::Instant::now() > deadline {
            break record;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(record.status.as_str(), "failed");
    assert!(record.error.as_deref().unwrap_or_default().contains("exceeded quota"), "{:?}", record.error);
}

#[tokio::test]
async fn the_facade_is_not_ready_while_the_api_server_cannot_be_reached() {
    let (client, server) = api_server(vec![]);
    server.await.expect("no exchange");
    let base = facade(client, Store::memory()).await;
    let response = reqwest12::get(format!("{base}/readyz")).await.expect("readyz");
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.expect("JSON");
    assert!(body["message"].as_str().expect("message").starts_with("the agents cannot be read"), "{body}");
}

#[tokio::test]
async fn a_parent_run_gets_an_agent_run_and_a_credentials_secret_owned_by_it() {
    let parent = agent(
        "deep-research",
        json!({"backend": "ChatbotAgent", "isSubagent": false, "share": global(), "context": {"subagents": ["research-explorer"]}}),
    );
    let (client, server) = api_server(vec![
        review("alice", &["yuxi:department:1"]),
        Exchange::new(Method::GET, &format!("{AGENTS}/deep-research"), 200, parent),
        Exchange::new(
            Method::POST,
            "/apis/yuxi.dev/v1alpha1/namespaces/team-a/agentruns?&fieldManager=yuxi-operator-api",
            201,
            json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun",
                   "metadata": {"name": "r-7", "namespace": "team-a", "uid": "run-uid-1"},
                   "spec": {"agent": "deep-research", "input": "q"}}),
        ),
        Exchange::new(
            Method::POST,
            "/api/v1/namespaces/team-a/secrets?&fieldManager=yuxi-operator-api",
            201,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "r-7-credentials"}}),
        ),
    ]);
    let store = Store::memory();
    let base = facade(client, store.clone()).await;
    let (status, body) = call(
        &base,
        "POST",
        "/api/agent/runs",
        "alice-token",
        Some(json!({"query": "q", "agent_slug": "deep-research"})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let bodies = tokio::time::timeout(std::time::Duration::from_secs(10), server)
        .await
        .expect("the launcher sends both objects")
        .expect("the whole script");
    assert_eq!(bodies[2]["metadata"]["name"], body["run_id"]);
    assert!(bodies[2]["spec"].get("parent").is_none(), "a parent run has no parent");
    let announced = format!("{}-credentials", body["run_id"].as_str().expect("id"));
    assert_eq!(bodies[2]["metadata"]["annotations"]["yuxi.dev/run-credentials"], announced.as_str());
    let secret = &bodies[3];
    assert_eq!(secret["metadata"]["name"], "r-7-credentials");
    assert_eq!(secret["type"], "yuxi.dev/run-credentials");
    assert_eq!(secret["metadata"]["labels"]["yuxi.dev/run"], body["run_id"], "labelled with its run");
    assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], "run-uid-1");
    assert_eq!(secret["metadata"]["ownerReferences"][0]["kind"], "AgentRun");
    let token = secret["stringData"]["token"].as_str().expect("the run's token");
    assert!(token.starts_with("yxr_"), "{token}");
    // The token carries its grant, signed by the facade's key; the store holds nothing of it.
    let now = jiff::Timestamp::now().as_second();
    let signed = token_key().verify(token, now).expect("signed by the facade's key");
    assert_eq!(
        (signed.grant.run_id.as_str(), signed.grant.uid.as_str(), signed.grant.department_id),
        (body["run_id"].as_str().expect("id"), "alice", Some(1))
    );
    let deadline = now + yuxi_operator::run::inputs::DEFAULT_TIMEOUT_SECONDS as i64;
    assert!(
        (deadline..=deadline + yuxi_operator::run::grant::TOKEN_GRACE_SECONDS + 5).contains(&signed.exp),
        "expires with the run's deadline and the pod's grace: {} for a deadline of {deadline}",
        signed.exp
    );
}

#[tokio::test]
async fn run_credentials_serve_the_tool_endpoints_only() {
    let (client, server) = api_server(vec![]);
    let store = Store::memory();
    let grant = yuxi_operator::run::RunGrant {
        run_id: "r-1".into(),
        thread_id: "t-1".into(),
        file_thread_id: "t-1".into(),
        agent: "deep-research".into(),
        uid: "alice".into(),
        role: yuxi_operator::access::Role::User,
        department_id: None,
    };
    running(&store, "r-1", "t-1", "alice").await;
    let token = token_key().sign(&grant, jiff::Timestamp::now().as_second() + 600);
    let base = facade(client, store).await;
    for (method, path) in
        [("GET", "/api/agent"), ("GET", "/api/agent/runs/r-1"), ("POST", "/api/agent/runs/r-1/cancel")]
    {
        let (status, body) = call(&base, method, path, &token, None).await;
        assert_eq!(status, 403, "{method} {path}: {body}");
        assert!(body["message"].as_str().expect("message").contains("/api/tools"), "{body}");
    }
    assert!(server.await.expect("no request reached the API server").is_empty());
}

/// Records a running parent run `run_id` of `uid` on `thread_id`, as the facade does when it starts one.
async fn running(store: &Store, run_id: &str, thread_id: &str, uid: &str) {
    let record = yuxi_operator::run::RunRecord {
        run_id: run_id.into(),
        thread_id: thread_id.into(),
        agent_slug: "deep-research".into(),
        uid: uid.into(),
        parent: None,
        status: yuxi_operator::run::RunStatus::Pending,
        error: None,
        created_at: "2026-12-01T10:00:00Z".into(),
        request: Default::default(),
        max_tokens: None,
        waiting: None,
        approvals: Vec::new(),
        ended_at: None,
        principal: None,
    };
    store.create_run(&record, None, Default::default()).await.expect("created");
    store.set_run_status(run_id, yuxi_operator::run::RunStatus::Running, None).await.expect("running");
}

const KNOWLEDGE_BASES: &str = "/apis/yuxi.dev/v1alpha1/namespaces/team-a/knowledgebases";

#[tokio::test]
async fn knowledge_bases_are_read_from_the_namespace_and_their_status_is_written_after_indexing() {
    use yuxi_operator::facade::services::catalog::{ClusterCatalog, KnowledgeCatalog};
    use yuxi_operator::facade::services::knowledge::{Knowledge, KnowledgeSettings, PlatformObjects};

    let kb = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "KnowledgeBase",
                    "metadata": {"name": "notes", "namespace": "team-a", "generation": 3, "resourceVersion": "11", "uid": "uid-notes"},
                    "spec": {"source": {"documents": {}}, "share": global()}});
    let (client, server) = crate::support::api_server::scripted::api_server_receiving(vec![
        Exchange::new(
            Method::GET,
            &format!("{KNOWLEDGE_BASES}?&limit=500"),
            200,
            json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "KnowledgeBaseList", "metadata": {"resourceVersion": "12"}, "items": [kb.clone()]}),
        ),
        Exchange::new(
            Method::PATCH,
            &format!("{KNOWLEDGE_BASES}/notes/status?&fieldManager=yuxi-operator-api"),
            200,
            kb,
        ),
    ]);
    let dir = tempfile::TempDir::new().expect("dir");
    let knowledge = Knowledge::new(
        KnowledgeCatalog::Cluster(Box::new(ClusterCatalog::new(client.clone(), "team-a"))),
        KnowledgeSettings {
            documents_dir: dir.path().join("documents"),
            index_dir: Some(dir.path().join("index")),
            sources_dir: None,
        },
        PlatformObjects::cluster(client.clone(), "team-a"),
        Some(kube::Api::namespaced(client, "team-a")),
    );
    knowledge.sync_all().await;
    let received = server.await.expect("the API server saw the list and the patch");
    let patch = &received[1];
    assert_eq!(patch.content_type.as_deref(), Some("application/merge-patch+json"));
    let status = &patch.body["status"];
    assert_eq!(
        (status["observedGeneration"].as_i64(), status["documents"].as_i64(), status["source"].as_str()),
        (Some(3), Some(0), Some("documents"))
    );
    let ready =
        status["conditions"].as_array().expect("conditions").iter().find(|c| c["type"] == "Ready").expect("Ready");
    assert_eq!(
        (ready["status"].as_str(), ready["reason"].as_str(), ready["observedGeneration"].as_i64()),
        (Some("True"), Some("Indexed"), Some(3))
    );
}

#[tokio::test]
async fn a_config_map_source_is_read_through_the_api_and_a_forbidden_one_is_not_ready_naming_the_chart_value() {
    use yuxi_operator::facade::services::catalog::{ClusterCatalog, KnowledgeCatalog};
    use yuxi_operator::facade::services::knowledge::{Knowledge, KnowledgeSettings, PlatformObjects};

    const CONFIG_MAPS: &str = "/api/v1/namespaces/team-a/configmaps";
    let kb = |name: &str, config_map: &str| {
        json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "KnowledgeBase",
               "metadata": {"name": name, "namespace": "team-a", "generation": 1, "resourceVersion": "11", "uid": format!("uid-{name}")},
               "spec": {"source": {"documents": {"configMap": {"name": config_map}}}, "share": global()}})
    };
    let (faq, other) = (kb("faq", "team-faq"), kb("other", "payments-config"));
    let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": "team-faq", "namespace": "team-a", "resourceVersion": "5"},
                            "data": {"faq.md": "# FAQ\n\nBackups are kept for 30 days.\n"}});
    let forbidden = failure(
        403,
        "Forbidden",
        "configmaps \"payments-config\" is forbidden: User \"system:serviceaccount:team-a:yuxi-api\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"team-a\"",
    );
    let (client, server) = crate::support::api_server::scripted::api_server_receiving(vec![
        Exchange::new(
            Method::GET,
            &format!("{KNOWLEDGE_BASES}?&limit=500"),
            200,
            json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "KnowledgeBaseList", "metadata": {"resourceVersion": "12"}, "items": [faq.clone(), other.clone()]}),
        ),
        Exchange::new(Method::GET, &format!("{CONFIG_MAPS}/team-faq"), 200, config_map),
        Exchange::new(
            Method::PATCH,
            &format!("{KNOWLEDGE_BASES}/faq/status?&fieldManager=yuxi-operator-api"),
            200,
            faq,
        ),
        Exchange::new(Method::GET, &format!("{CONFIG_MAPS}/payments-config"), 403, forbidden),
        Exchange::new(
            Method::PATCH,
            &format!("{KNOWLEDGE_BASES}/other/status?&fieldManager=yuxi-operator-api"),
            200,
            other,
        ),
    ]);
    let dir = tempfile::TempDir::new().expect("dir");
    let knowledge = Knowledge::new(
        KnowledgeCatalog::Cluster(Box::new(ClusterCatalog::new(client.clone(), "team-a"))),
        KnowledgeSettings {
            documents_dir: dir.path().join("documents"),
            index_dir: Some(dir.path().join("index")),
            sources_dir: None,
        },
        PlatformObjects::cluster(client.clone(), "team-a"),
        Some(kube::Api::namespaced(client, "team-a")),
    );
    knowledge.sync_all().await;
    let received = server.await.expect("the API server saw every request");
    let ready = |status: &Value| {
        let ready = status["conditions"].as_array().expect("conditions").iter().find(|c| c["type"] == "Ready").cloned();
        ready.expect("Ready")
    };
    let indexed = &received[2].body["status"];
    assert_eq!((indexed["documents"].as_i64(), indexed["chunks"].as_i64()), (Some(1), Some(1)), "{indexed}");
    assert_eq!(ready(indexed)["status"], "True");
    let refused = &received[4].body["status"];
    assert_eq!(ready(refused)["status"], "False", "{refused}");
    let message = refused["lastIndexError"].as_str().unwrap_or_default();
    assert!(message.contains("knowledge.configMapNames") && message.contains("payments-config"), "{message}");
}

/// Puts `run_id`, `uid`'s run of thread `thread_id`, in `store` waiting for a decision on one
/// `write_file` call (`call_0_0`) until `expires_at`.
async fn waiting_run(store: &Store, run_id: &str, thread_id: &str, uid: &str, expires_at: &str) {
    use yuxi_operator::run::approval::{ActionRequest, Checkpoint, Waiting};
    use yuxi_operator::run::message::ToolCall;
    running(store, run_id, thread_id, uid).await;
    let tool_call = ToolCall::new("call_0_0", "write_file", "{\"path\": \"/tmp/x\", \"content\": \"y\"}");
    let pending = vec![ActionRequest::of(&tool_call)];
    let checkpoint = Checkpoint {
        added: vec![],
        steps: 1,
        usage: Default::default(),
        remaining: vec![tool_call],
        pending: pending.clone(),
        remaining_seconds: 100,
        decisions: vec![],
        input: "write it".into(),
    };
    let waiting =
        Waiting { reason: "ApprovalRequired".into(), action_requests: pending, expires_at: expires_at.into() };
    let interrupt = json!({"type": "approval_required"});
    let keep = std::time::Duration::from_secs(600);
    assert!(store.pause_run(run_id, thread_id, &checkpoint, &waiting, interrupt, keep).await.expect("paused"));
}

/// The exchanges of a resume of `r-9` the API server answers: the agent read, the AgentRun and its
/// credentials Secret patched.
fn resume_exchanges() -> Vec<Exchange> {
    let parent = agent("deep-research", json!({"backend": "ChatbotAgent", "isSubagent": false, "share": global()}));
    let run = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun",
                     "metadata": {"name": "r-9", "namespace": "team-a", "uid": "run-uid-9",
                                  "annotations": {"yuxi.dev/run-credentials": "r-9-credentials"}},
                     "spec": {"agent": "deep-research", "input": "write it"}});
    vec![
        Exchange::new(Method::GET, &format!("{AGENTS}/deep-research"), 200, parent),
        Exchange::new(
            Method::PATCH,
            "/apis/yuxi.dev/v1alpha1/namespaces/team-a/agentruns/r-9?&fieldManager=yuxi-operator-api",
            200,
            run,
        ),
        Exchange::new(
            Method::PATCH,
            "/api/v1/namespaces/team-a/secrets/r-9-credentials?&fieldManager=yuxi-operator-api",
            200,
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "r-9-credentials"}}),
        ),
    ]
}

fn approve_r9() -> Value {
    json!({"resume": {"run_id": "r-9", "decisions": [{"tool_call_id": "call_0_0", "decision": "approve"}]}})
}

#[tokio::test]
async fn a_resume_marks_the_agent_run_resumed_and_renews_its_credentials() {
    let store = Store::memory();
    waiting_run(&store, "r-9", "t-9", "alice", "2099-01-01T00:00:00Z").await;
    let mut exchanges = vec![review("alice", &["yuxi:department:1"])];
    exchanges.extend(resume_exchanges());
    let (client, server) = crate::support::api_server::scripted::api_server_receiving(exchanges);
    let base = facade(client, store.clone()).await;
    let (status, body) = call(&base, "POST", "/api/agent/runs", "alice-token", Some(approve_r9())).await;
    assert_eq!((status, body["run_id"].as_str()), (200, Some("r-9")), "{body}");
    let received = tokio::time::timeout(std::time::Duration::from_secs(10), server)
        .await
        .expect("the launcher patches both objects")
        .expect("the whole script");
    assert_eq!(received[2].content_type.as_deref(), Some("application/merge-patch+json"));
    assert!(received[2].body["metadata"]["annotations"]["yuxi.dev/resumed-at"].is_string(), "{}", received[2].body);
    let token = received[3].body["stringData"]["token"].as_str().expect("a fresh token");
    let signed = token_key().verify(token, jiff::Timestamp::now().as_second()).expect("signed by the facade");
    assert_eq!((signed.grant.run_id.as_str(), signed.grant.uid.as_str()), ("r-9", "alice"));
    let record = store.run_record("r-9").await.expect("read").expect("the run");
    assert_eq!((record.status, record.waiting), (yuxi_operator::run::RunStatus::Pending, None));
    let (taken, decisions) = store.take_resumption("r-9").await.expect("read").expect("its resumption");
    assert_eq!((taken.steps, decisions.len()), (1, 1));
}

#[tokio::test]
async fn an_administrator_cannot_decide_on_another_users_run_and_a_superadmins_decision_is_audited() {
    let store = Store::memory();
    waiting_run(&store, "r-9", "t-9", "alice", "2099-01-01T00:00:00Z").await;
    // One review per token: the facade remembers it.
    let mut exchanges = vec![review("ops", &["yuxi:admins"]), review("root", &["yuxi:superadmins"])];
    exchanges.extend(resume_exchanges());
    let (client, server) = crate::support::api_server::scripted::api_server_receiving(exchanges);
    let base = facade(client, store.clone()).await;
    // An administrator's edit would run in Alice's sandbox: the run answers as a missing one.
    let (status, admin) = call(&base, "POST", "/api/agent/runs", "ops-token", Some(approve_r9())).await;
    let missing =
        json!({"resume": {"run_id": "r-0", "decisions": [{"tool_call_id": "call_0_0", "decision": "approve"}]}});
    let (missing_status, missing) = call(&base, "POST", "/api/agent/runs", "ops-token", Some(missing)).await;
    assert_eq!((status, missing_status), (404, 404), "{admin}");
    assert_eq!(
        admin["message"].as_str().map(|m| m.replace("r-9", "x")),
        missing["message"].as_str().map(|m| m.replace("r-0", "x"))
    );
    let record = store.run_record("r-9").await.expect("read").expect("the run");
    assert_eq!(record.status, yuxi_operator::run::RunStatus::Waiting, "nothing changed");
    // A superadmin decides, and the run's own stream says who did, and what.
    let (status, body) = call(&base, "POST", "/api/agent/runs", "root-token", Some(approve_r9())).await;
    assert_eq!(status, 200, "{body}");
    tokio::time::timeout(std::time::Duration::from_secs(10), server)
        .await
        .expect("launched")
        .expect("the whole script");
    let events = store.read_events("r-9", "0-0", 100).await.expect("events");
    let audit: Vec<_> = events.iter().map(|e| &e.envelope.payload).filter(|p| p["type"] == "decided_by").collect();
    assert_eq!(audit.len(), 1, "{events:?}");
    assert_eq!(audit[0]["role"], "superadmin");
    assert_ne!(audit[0]["uid"], "alice");
    assert_eq!(audit[0]["decisions"], json!([{"tool_call_id": "call_0_0", "decision": "approve", "edited": false}]));
    let (_, decisions) = store.take_resumption("r-9").await.expect("read").expect("its resumption");
    assert_eq!(decisions.len(), 1);
}

#[tokio::test]
async fn a_decision_after_the_approvals_deadline_ends_the_run_timed_out_and_answers_409() {
    let store = Store::memory();
    // The deadline passed a minute ago, and no sweep has ended the run yet.
    let due = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60);
    waiting_run(&store, "r-9", "t-9", "alice", &due.to_string()).await;
    let (client, _server) = crate::support::api_server::scripted::api_server_receiving(vec![review("alice", &[])]);
    let base = facade(client, store.clone()).await;
    let (status, late) = call(&base, "POST", "/api/agent/runs", "alice-token", Some(approve_r9())).await;
    assert_eq!(status, 409, "{late}");
    assert!(late["message"].as_str().unwrap_or_default().contains("ApprovalTimeout"), "{late}");
    assert!(store.take_resumption("r-9").await.expect("read").is_none(), "the late decisions were not taken");
    let result = store.run_result("r-9").await.expect("read").expect("ended");
    assert_eq!(
        (result.status, result.reason.as_deref()),
        (yuxi_operator::run::RunStatus::Failed, Some("ApprovalTimeout"))
    );
    let events = store.read_events("r-9", "0-0", 100).await.expect("events");
    let ends = events.iter().filter(|e| e.envelope.event == yuxi_operator::run::EventKind::End).count();
    assert_eq!(ends, 1);
}
