//! The OpenAPI document's common parts (statuses, links) and the docs UI at `/api/docs`, served for real.

use serde_json::Value;
use yuxi_operator::facade::{AgentCatalog, FacadeParts, FacadeState, Users, router};

use crate::support::examples::example_agents;

/// The facade over the example agents, with no run store; its base URL.
async fn start() -> String {
    let state: FacadeState =
        FacadeParts::new(Users::new(Vec::new()).expect("users").into(), AgentCatalog::new(example_agents()), None)
            .into();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move { axum::serve(listener, router(state)).await.expect("serves") });
    format!("http://{addr}")
}

async fn text(url: &str) -> (u16, String, String) {
    let response = reqwest12::get(url).await.expect("reaches the facade");
    let status = response.status().as_u16();
    let kind = response.headers().get("content-type").map(|v| v.to_str().unwrap_or_default().to_string());
    (status, kind.unwrap_or_default(), response.text().await.expect("body"))
}

async fn document(base: &str) -> Value {
    let (status, _, body) = text(&format!("{base}/api/openapi.json")).await;
    assert_eq!(status, 200);
    serde_json::from_str(&body).expect("JSON")
}

#[tokio::test]
async fn the_docs_ui_is_served_from_the_binary_and_reads_the_served_document() {
    let base = start().await;
    // `/api/docs` redirects to `/api/docs/`, the page.
    let (status, kind, page) = text(&format!("{base}/api/docs")).await;
    assert_eq!((status, kind.starts_with("text/html")), (200, true), "{kind}");
    assert!(page.contains("swagger-ui"), "{page}");
    // Nothing from elsewhere: every script and style the page names is served here.
    assert!(!page.contains("src=\"http") && !page.contains("href=\"http"), "{page}");
    for asset in ["swagger-ui-bundle.js", "swagger-ui.css", "swagger-initializer.js"] {
        assert!(page.contains(asset), "the page names {asset}");
        let (status, _, body) = text(&format!("{base}/api/docs/{asset}")).await;
        assert_eq!(status, 200, "{asset}");
        assert!(!body.is_empty(), "{asset}");
    }
    let (_, _, initializer) = text(&format!("{base}/api/docs/swagger-initializer.js")).await;
    assert!(initializer.contains("\"/api/openapi.json\""), "{initializer}");
    // The page may not be framed, sniffed or sent on as a referrer.
    let page = reqwest12::get(format!("{base}/api/docs/")).await.expect("reaches the facade");
    for (name, value) in
        [("x-frame-options", "DENY"), ("x-content-type-options", "nosniff"), ("referrer-policy", "no-referrer")]
    {
        assert_eq!(page.headers().get(name).and_then(|v| v.to_str().ok()), Some(value), "{name}");
    }
}

#[tokio::test]
async fn every_route_documents_the_statuses_of_the_body_reader_and_the_token() {
    let document = document(&start().await).await;
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let responses = &operation["responses"];
            // A route that takes no token (the login, the login page's system routes) answers no 401
            // for want of one.
            let takes_token = operation["security"].as_array().is_some_and(|s| !s.is_empty());
            let statuses: &[&str] = if takes_token { &["400", "401", "408", "413"] } else { &["400", "408", "413"] };
            for status in statuses.iter().copied() {
                assert_eq!(
                    responses[status]["content"]["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ErrorBody",
                    "{method} {path} {status}"
                );
            }
            if operation.get("requestBody").is_some() {
                assert!(responses["422"].is_object(), "{method} {path} has a body: it documents 422");
            }
        }
    }
    // The routes Yuxi's login page reads before anyone logs in take no token; every other route does.
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
    for (path, item) in document["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            let takes_token = operation["security"].as_array().is_some_and(|s| !s.is_empty());
            assert_eq!(takes_token, !public.contains(&path.as_str()), "{method} {path}");
        }
    }
}

#[tokio::test]
async fn run_starts_link_to_the_routes_that_take_the_run_id() {
    let document = document(&start().await).await;
    let operations: Vec<&Value> = document["paths"]
        .as_object()
        .expect("paths")
        .values()
        .flat_map(|item| item.as_object().expect("item").values())
        .collect();
    let by_id = |id: &str| *operations.iter().find(|o| o["operationId"] == id).unwrap_or_else(|| panic!("{id}"));
    let links = |id: &str| by_id(id)["responses"]["200"]["links"].as_object().cloned().unwrap_or_default();
    let started = links("start_run");
    for target in ["get_run", "get_run_result", "stream_run_events", "cancel_run"] {
        let link =
            started.values().find(|l| l["operationId"] == target).unwrap_or_else(|| panic!("start_run -> {target}"));
        assert_eq!(link["parameters"]["run_id"], "$response.body#/run_id", "{target}");
    }
    let subagent = links("subagent_start");
    for target in ["subagent_status", "subagent_await", "subagent_events", "subagent_cancel"] {
        let link = subagent
            .values()
            .find(|l| l["operationId"] == target)
            .unwrap_or_else(|| panic!("subagent_start -> {target}"));
        assert_eq!(link["requestBody"]["run_id"], "$response.body#/run_id", "{target}");
        assert_eq!(link["requestBody"]["parent"]["run_id"], "$response.body#/created_by_run_id", "{target}");
    }
    // Every link names an operation of the document.
    for link in started.values().chain(subagent.values()) {
        by_id(link["operationId"].as_str().expect("operationId"));
    }
}

#[tokio::test]
async fn agent_bodies_state_the_rules_of_the_agent_validation() {
    let document = document(&start().await).await;
    let schema = |name: &str| document["components"]["schemas"][name]["allOf"].as_array().cloned().expect(name);
    let create = schema("CreateAgent");
    assert_eq!(create[0]["additionalProperties"], false, "the fields themselves come first");
    assert_eq!(create[1]["properties"]["backend_id"]["enum"], serde_json::json!(["ChatbotAgent", "SubAgentBackend"]));
    assert_eq!(create[1]["properties"]["slug"]["maxLength"], 63);
    assert_eq!(schema("UpdateAgent").len(), 2, "an update states the fields' rules, not the stored agent's");
    let context = &schema("YuxiContext")[1]["properties"];
    assert_eq!(
        (context["tools"]["maxItems"].as_u64(), context["tools"]["items"]["minLength"].as_u64()),
        (Some(256), Some(1))
    );
    assert_eq!(context["max_execution_steps"]["maximum"], 10000);
}
