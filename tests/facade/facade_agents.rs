//! `/api/agent` over real HTTP: authentication, visibility and rights across users, validation errors in
//! Yuxi's field names, and bad bodies answered with JSON 4xx errors.

use serde_json::{Value, json};
use yuxi_operator::access::Role;
use yuxi_operator::facade::http::auth::UserEntry;
use yuxi_operator::facade::{AgentCatalog, FacadeParts, FacadeState, Users, router};

use crate::support::examples::example_agents;

pub(crate) struct Api {
    pub(crate) base: String,
    pub(crate) client: reqwest12::Client,
}

fn user(token: &str, uid: &str, role: Role, department_id: Option<i64>) -> UserEntry {
    UserEntry { token: token.into(), uid: uid.into(), role, department_id, username: None, password_hash: None }
}

pub(crate) async fn start() -> Api {
    start_with_mcp_servers(Vec::new()).await
}

/// [`start`], with `servers` as the namespace's McpServers.
pub(crate) async fn start_with_mcp_servers(servers: Vec<yuxi_operator::resources::mcp_server::McpServer>) -> Api {
    let users = Users::new(vec![
        user("alice-token", "alice", Role::User, Some(1)),
        user("bob-token", "bob", Role::User, Some(2)),
        user("admin-token", "ops", Role::Admin, None),
        user("root-token", "root", Role::Superadmin, None),
    ])
    .expect("users");
    let mut parts = FacadeParts::new(users.into(), AgentCatalog::new(example_agents()), None);
    parts.mcp_resources = yuxi_operator::facade::services::catalog::Catalog::new(servers);
    let state: FacadeState = parts.into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router(state)).await.expect("serves") });
    Api { base: format!("http://{addr}"), client: reqwest12::Client::new() }
}

impl Api {
    pub(crate) async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<String>,
    ) -> (u16, Value) {
        let mut request = self.client.request(method.parse().expect("method"), format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.header("content-type", "application/json").body(body);
        }
        let response = request.send().await.expect("reaches the facade");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        (status, if text.is_empty() { Value::Null } else { serde_json::from_str(&text).expect("a JSON answer") })
    }

    pub(crate) async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.call("GET", path, Some(token), None).await
    }

    pub(crate) async fn send(&self, method: &str, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.call(method, path, Some(token), Some(body.to_string())).await
    }
}

fn slugs(list: &Value) -> Vec<&str> {
    list["agents"].as_array().expect("agents").iter().map(|a| a["slug"].as_str().expect("slug")).collect()
}

#[tokio::test]
async fn a_request_without_a_valid_token_is_401() {
    let api = start().await;
    for token in [None, Some("nobody")] {
        let (status, body) = api.call("GET", "/api/agent", token, None).await;
        assert_eq!(status, 401);
        assert_eq!(body["code"], "unauthorized");
    }
}

#[tokio::test]
async fn lists_hide_subagents_unless_asked() {
    let api = start().await;
    let (status, list) = api.get("/api/agent", "alice-token").await;
    assert_eq!(status, 200);
    assert_eq!(slugs(&list), ["deep-research", "note-taker"]);
    let (_, all) = api.get("/api/agent?include_subagents=true", "alice-token").await;
    assert_eq!(slugs(&all), ["deep-research", "fact-verifier", "general-purpose", "note-taker", "research-explorer"]);
    let (_, explorer) = api.get("/api/agent/research-explorer", "alice-token").await;
    let explorer = &explorer["agent"];
    assert_eq!(explorer["backend_id"], "SubAgentBackend");
    assert_eq!(explorer["is_subagent"], true);
    assert_eq!(explorer["config_json"]["context"]["tool_approval_mode"], "always_trust");
    assert_eq!(explorer["share_config"]["read_scope"]["access_level"], "global");
    assert_eq!(
        (explorer["can_manage"].as_bool(), explorer["effective_permission"].as_str()),
        (Some(false), Some("read"))
    );
    let (status, bad) = api.get("/api/agent?include_subagents=maybe", "alice-token").await;
    assert_eq!((status, bad["code"].as_str()), (400, Some("bad_request")));
    let (_, default) = api.get("/api/agent/default", "bob-token").await;
    assert_eq!(default["agent"]["slug"], "deep-research");
    let (_, backends) = api.get("/api/agent/backends", "bob-token").await;
    let ids: Vec<(&str, &str)> = backends["backends"]
        .as_array()
        .expect("list")
        .iter()
        .map(|b| (b["id"].as_str().unwrap_or_default(), b["backend_id"].as_str().unwrap_or_default()))
        .collect();
    // Yuxi's web client reads `backend_id`.
    assert_eq!(ids, [("ChatbotAgent", "ChatbotAgent"), ("SubAgentBackend", "SubAgentBackend")]);
}

#[tokio::test]
async fn the_caller_is_who_the_token_names_and_a_bad_token_is_401() {
    let api = start().await;
    let (status, me) = api.get("/api/auth/me", "alice-token").await;
    assert_eq!(status, 200);
    assert_eq!(
        (me["uid"].as_str(), me["user_id"].as_str(), me["role"].as_str()),
        (Some("alice"), Some("alice"), Some("user"))
    );
    assert_eq!(me["department_id"], 1);
    let (status, refused) = api.get("/api/auth/me", "no-such-token").await;
    assert_eq!((status, refused["code"].as_str(), refused["detail"].is_string()), (401, Some("unauthorized"), true));
}

#[tokio::test]
async fn a_new_agent_is_private_to_its_owner_until_shared() {
    let api = start().await;
    let (status, created) = api.send("POST", "/api/agent", "alice-token", json!({"name": "Notes Helper"})).await;
    assert_eq!(status, 201, "{created}");
    let created = &created["agent"];
    assert_eq!(created["slug"], "notes-helper");
    assert_eq!(created["created_by"], "alice");
    assert_eq!(created["can_manage"], true);
    let (again, second) = api.send("POST", "/api/agent", "alice-token", json!({"name": "Notes helper"})).await;
    assert_eq!((again, second["agent"]["slug"].as_str()), (201, Some("notes-helper-2")));

    let (status, hidden) = api.get("/api/agent/notes-helper", "bob-token").await;
    assert_eq!((status, hidden["code"].as_str()), (404, Some("not_found")));
    let (status, _) = api.send("PUT", "/api/agent/notes-helper", "bob-token", json!({"description": "mine now"})).await;
    assert_eq!(status, 404, "an invisible agent answers as a missing one");
    assert!(!slugs(&api.get("/api/agent", "bob-token").await.1).contains(&"notes-helper"));

    let share = json!({"version": 2, "read_scope": {"access_level": "user", "user_uids": ["alice", "bob"]}, "manage_scope": null});
    let (status, _) = api.send("PUT", "/api/agent/notes-helper", "alice-token", json!({"share_config": share})).await;
    assert_eq!(status, 200);
    let (status, seen) = api.get("/api/agent/notes-helper", "bob-token").await;
    assert_eq!((status, seen["agent"]["effective_permission"].as_str()), (200, Some("read")));
    let (status, refused) =
        api.send("PUT", "/api/agent/notes-helper", "bob-token", json!({"description": "mine now"})).await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("forbidden")));
    let (status, _) = api.call("DELETE", "/api/agent/notes-helper", Some("bob-token"), None).await;
    assert_eq!(status, 403);

    let (status, _) = api.call("DELETE", "/api/agent/notes-helper", Some("alice-token"), None).await;
    assert_eq!(status, 204);
    assert_eq!(api.get("/api/agent/notes-helper", "alice-token").await.0, 404);
}

#[tokio::test]
async fn only_admins_share_widely_or_set_the_default() {
    let api = start().await;
    let global = json!({"name": "Open", "share_config": {"version": 2, "read_scope": {"access_level": "global"}}});
    let (status, body) = api.send("POST", "/api/agent", "alice-token", global.clone()).await;
    assert_eq!(status, 403, "{body}");
    assert!(body["message"].as_str().expect("message").starts_with("share_config.read_scope"), "{body}");
    assert_eq!(api.send("POST", "/api/agent", "admin-token", global).await.0, 201);
    let (status, _) = api.send("POST", "/api/agent", "alice-token", json!({"name": "Main", "set_default": true})).await;
    assert_eq!(status, 403);
}

#[tokio::test]
async fn the_builtin_subagent_cannot_be_deleted() {
    let api = start().await;
    let (status, body) = api.call("DELETE", "/api/agent/general-purpose", Some("root-token"), None).await;
    assert_eq!((status, body["code"].as_str()), (409, Some("conflict")));
}

#[tokio::test]
async fn rule_violations_are_422_naming_the_yuxi_field() {
    let api = start().await;
    let cases = [
        (json!({"name": "Helper", "backend_id": "SubAgentBackend", "is_subagent": false}), "is_subagent"),
        (json!({"name": "Chat", "is_subagent": true}), "is_subagent"),
        (json!({"name": "Helper", "backend_id": "LangGraph"}), "backend_id"),
        (
            json!({"name": "Chat", "config_json": {"context": {"max_execution_steps": 0}}}),
            "config_json.context.max_execution_steps",
        ),
        (
            json!({"name": "Helper", "backend_id": "SubAgentBackend", "config_json": {"context": {"subagents": []}}}),
            "config_json.context.subagents",
        ),
        (json!({"name": "Chat", "slug": "Not A Slug"}), "slug"),
    ];
    // As an administrator, who may set every field: the value, not the right, is at fault.
    for (body, field) in cases {
        let (status, answer) = api.send("POST", "/api/agent", "admin-token", body.clone()).await;
        assert_eq!(status, 422, "{body} -> {answer}");
        assert_eq!(answer["field"], field, "{body} -> {answer}");
        assert_eq!(answer["code"], "validation_failed");
    }
}

#[tokio::test]
async fn bad_bodies_are_4xx_with_a_json_error() {
    let api = start().await;
    let (status, body) = api.call("POST", "/api/agent", Some("alice-token"), Some("{not json".into())).await;
    assert_eq!((status, body["code"].as_str()), (400, Some("bad_request")));
    let (status, body) = api.send("POST", "/api/agent", "alice-token", json!({"name": "x", "colour": "red"})).await;
    assert_eq!(status, 422);
    assert!(body["message"].as_str().expect("message").contains("unknown field `colour`"), "{body}");
    let (status, body) = api
        .send("POST", "/api/agent", "alice-token", json!({"name": "x", "config_json": {"context": {"tools": "ls"}}}))
        .await;
    assert_eq!((status, body["field"].as_str()), (422, Some("config_json.context.tools")), "{body}");
    let (status, body) = api.send("POST", "/api/agent", "alice-token", json!({"description": "no name"})).await;
    assert_eq!(status, 422, "{body}");
    let huge = json!({"name": "x".repeat(2 * 1024 * 1024)}).to_string();
    let (status, body) = api.call("POST", "/api/agent", Some("alice-token"), Some(huge)).await;
    assert_eq!((status, body["code"].as_str()), (413, Some("payload_too_large")));
    let (status, body) = api.get("/api/nowhere", "alice-token").await;
    assert_eq!((status, body["code"].as_str()), (404, Some("not_found")));
}

#[tokio::test]
async fn the_tools_of_an_agent_list_its_allowed_subagents() {
    let api = start().await;
    let (status, tools) = api.get("/api/tools?agent=deep-research", "bob-token").await;
    assert_eq!(status, 200);
    assert_eq!(tools["subagents"], json!(["research-explorer", "fact-verifier"]));
    // The six delegation tools and subagent_wait_any.
    assert_eq!(tools["tools"].as_array().expect("tools").len(), 7);
    let prompt = tools["prompt"].as_str().expect("prompt");
    assert!(prompt.contains("- research-explorer: Explores a research question"), "{prompt}");
    let (_, sub) = api.get("/api/tools?agent=research-explorer", "bob-token").await;
    assert_eq!((sub["tools"].as_array().map(Vec::len), &sub["prompt"]), (Some(0), &Value::Null), "no nesting");
    assert_eq!(api.get("/api/tools?agent=nope", "bob-token").await.0, 404);
    assert_eq!(api.get("/api/tools", "bob-token").await.0, 400);
}

#[tokio::test]
async fn without_a_run_store_the_tools_answer_503() {
    let api = start().await;
    let body = json!({"parent": {"agent": "deep-research", "run_id": "r", "thread_id": "t"}, "description": "x", "subagent_slug": "fact-verifier"});
    let (status, answer) = api.send("POST", "/api/tools/subagent_start", "alice-token", body).await;
    assert_eq!((status, answer["code"].as_str()), (503, Some("unavailable")), "{answer}");
}

#[tokio::test]
async fn metrics_count_requests_by_route_pattern_not_by_path() {
    let api = start().await;
    assert_eq!(api.get("/api/agent/research-explorer", "alice-token").await.0, 200);
    assert_eq!(api.get("/api/agent/fact-verifier", "alice-token").await.0, 200);
    assert_eq!(api.get("/api/agent/nobody", "alice-token").await.0, 404);
    let response = api.client.get(format!("{}/metrics", api.base)).send().await.expect("metrics");
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"].to_str().expect("type").starts_with("application/openmetrics-text"));
    let text = response.text().await.expect("text");
    assert!(
        text.contains(r#"yuxi_http_requests_total{method="GET",route="/api/agent/{slug}",status="200"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"yuxi_http_requests_total{method="GET",route="/api/agent/{slug}",status="404"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"yuxi_http_request_duration_seconds_count{method="GET",route="/api/agent/{slug}"} 3"#),
        "{text}"
    );
    assert!(!text.contains("research-explorer"), "{text}");
}

#[tokio::test]
async fn the_facade_is_ready_when_its_agents_can_be_read() {
    let api = start().await;
    let response = api.client.get(format!("{}/readyz", api.base)).send().await.expect("readyz");
    assert_eq!(response.status(), 200);
}

/// Every `$ref` in `value`.
fn refs<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
    match value {
        Value::Object(map) => {
            for (key, item) in map {
                match (key.as_str(), item) {
                    ("$ref", Value::String(target)) => found.push(target),
                    _ => refs(item, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| refs(item, found)),
        _ => {}
    }
}

#[tokio::test]
async fn the_openapi_document_describes_every_route_with_resolvable_schemas() {
    let api = start().await;
    let response = api.client.get(format!("{}/api/openapi.json", api.base)).send().await.expect("document");
    assert_eq!(response.status(), 200);
    let document: Value = response.json().await.expect("JSON");
    assert_eq!(document["openapi"], "3.1.0");
    let mut operations: Vec<String> = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            operations.push(format!("{} {path}", method.to_uppercase()));
            assert!(ids.insert(operation["operationId"].as_str().expect("operationId")), "{method} {path}: id reused");
            // The login, and what the login page reads before anyone logs in, take no bearer token.
            let public = [
                "/api/auth/token",
                "/api/system/health",
                "/api/system/info",
                "/api/system/config",
                "/api/auth/check-first-run",
                "/api/auth/oidc/config",
                "/api/auth/oidc/login-url",
                "/api/auth/oidc/callback",
                "/api/auth/oidc/exchange-code",
            ];
            if public.contains(&path.as_str()) {
                assert!(operation["security"].is_null(), "{method} {path} takes no bearer token");
            } else {
                assert_eq!(operation["security"], json!([{"bearer": []}]), "{method} {path}");
                assert!(operation["responses"]["401"].is_object(), "{method} {path} documents 401");
            }
        }
    }
    operations.sort();
    let expected = [
        "DELETE /api/agent/{slug}",
        "DELETE /api/chat/thread/{thread_id}",
        "DELETE /api/chat/thread/{thread_id}/attachments/{file_id}",
        "DELETE /api/knowledge/{slug}",
        "DELETE /api/knowledge/{slug}/documents/{name}",
        "GET /api/agent",
        "GET /api/agent/backends",
        "GET /api/agent/backends/{backend_id}",
        "GET /api/agent/default",
        "GET /api/agent/requests/{request_id}",
        "GET /api/agent/requests/{request_id}/events",
        "GET /api/agent/runs",
        "GET /api/agent/runs/{run_id}",
        "GET /api/agent/runs/{run_id}/events",
        "GET /api/agent/runs/{run_id}/result",
        "GET /api/agent/runs/{run_id}/trace",
        "GET /api/agent/thread/{thread_id}/active_run",
        "GET /api/agent/thread/{thread_id}/requests",
        "GET /api/agent/{slug}",
        "GET /api/auth/check-first-run",
        "GET /api/auth/me",
        "GET /api/auth/oidc/callback",
        "GET /api/auth/oidc/config",
        "GET /api/auth/oidc/login-url",
        "GET /api/auth/users/access-options",
        "GET /api/chat/message/{message_id}/feedback",
        "GET /api/chat/thread/{thread_id}/attachments",
        "GET /api/chat/thread/{thread_id}/history",
        "GET /api/chat/thread/{thread_id}/state",
        "GET /api/chat/threads",
        "GET /api/chat/threads/search",
        "GET /api/departments",
        "GET /api/knowledge",
        "GET /api/knowledge/{slug}",
        "GET /api/knowledge/{slug}/documents",
        "GET /api/projects",
        "GET /api/projects/history-candidates",
        "GET /api/skills",
        "GET /api/skills/accessible",
        "GET /api/system/config",
        "GET /api/system/health",
        "GET /api/system/info",
        "GET /api/system/mcp-servers",
        "GET /api/system/mcp-servers/{name}/tools",
        "GET /api/system/model-providers/models/v2",
        "GET /api/system/tools",
        "GET /api/tasks",
        "GET /api/tasks/{task_id}",
        "GET /api/threads/{thread_id}/messages",
        "GET /api/tools",
        "GET /api/tools/knowledge_bases",
        "GET /api/viewer/filesystem/download",
        "GET /api/viewer/filesystem/file",
        "GET /api/viewer/filesystem/tree",
        "GET /api/workspace/download",
        "GET /api/workspace/file",
        "GET /api/workspace/tree",
        "POST /api/agent",
        "POST /api/agent/requests/{request_id}/cancel",
        "POST /api/agent/requests/{request_id}/steer",
        "POST /api/agent/runs",
        "POST /api/agent/runs/{run_id}/cancel",
        "POST /api/agent/thread/{thread_id}/requests/continue",
        "POST /api/agent/{slug}/set_default",
        "POST /api/auth/oidc/exchange-code",
        "POST /api/auth/token",
        "POST /api/chat/attachments/tmp",
        "POST /api/chat/call",
        "POST /api/chat/image/upload",
        "POST /api/chat/message/{message_id}/feedback",
        "POST /api/chat/thread",
        "POST /api/chat/thread/{thread_id}/attachments/confirm",
        "POST /api/chat/thread/{thread_id}/viewed",
        "POST /api/knowledge",
        "POST /api/knowledge/{slug}/documents",
        "POST /api/knowledge/{slug}/search",
        "POST /api/tools/caller_token",
        "POST /api/tools/knowledge_search",
        "POST /api/tools/subagent_await",
        "POST /api/tools/subagent_cancel",
        "POST /api/tools/subagent_events",
        "POST /api/tools/subagent_start",
        "POST /api/tools/subagent_status",
        "POST /api/tools/subagent_wait_any",
        "POST /api/tools/task",
        "PUT /api/agent/{slug}",
        "PUT /api/chat/thread/{thread_id}",
        "PUT /api/knowledge/{slug}",
    ];
    assert_eq!(operations, expected);
    let schemas = document["components"]["schemas"].as_object().expect("schemas");
    let mut found = Vec::new();
    refs(&document, &mut found);
    for target in found {
        let name = target.strip_prefix("#/components/schemas/").expect("a schema reference");
        assert!(schemas.contains_key(name), "{target} does not resolve");
    }
    let mut required: Vec<&str> = schemas["StartBody"]["required"]
        .as_array()
        .expect("required")
        .iter()
        .map(|f| f.as_str().expect("name"))
        .collect();
    required.sort();
    // `parent` is required of a user's token (a run's own credentials may leave it out: see `StartParent`).
    assert_eq!(required, ["description", "parent", "subagent_slug"]);
    assert_eq!(document["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive() {
    let api = start().await;
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let response = api
            .client
            .get(format!("{}/api/agent", api.base))
            .header("authorization", format!("{scheme} alice-token"))
            .send()
            .await
            .expect("reaches");
        assert_eq!(response.status(), 200, "{scheme}");
    }
    let response =
        api.client.get(format!("{}/api/agent", api.base)).header("authorization", "Basic alice-token").send().await;
    assert_eq!(response.expect("reaches").status(), 401);
}

#[tokio::test]
async fn a_request_with_two_authorization_headers_is_401() {
    let api = start().await;
    let response = api
        .client
        .get(format!("{}/api/agent", api.base))
        .header("authorization", "Bearer alice-token")
        .header("authorization", "Bearer bob-token")
        .send()
        .await
        .expect("reaches");
    assert_eq!(response.status(), 401);
    let body: serde_json::Value = response.json().await.expect("the error body");
    assert!(body["message"].as_str().unwrap_or_default().contains("one Authorization header"), "{body}");
}
