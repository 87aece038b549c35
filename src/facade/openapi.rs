//! The parts of the OpenAPI document that name particular routes and schemas, applied by the router once
//! the features' routes are in (the statuses every route shares are the kernel's,
//! [`crate::facade::http::openapi`]):
//!
//! - the document's fixed parts ([`ApiDoc`]: its title, tags and the bearer-token scheme);
//! - the rules of an agent body that tie fields together or come from the Agent's validation;
//! - the OpenAPI links from the answers that name a run (`start_run`, `subagent_start`) to the routes
//!   that take its id, so that a client (and the contract test, `scripts/contract-test`) can follow a run
//!   from its start.

use serde_json::json;
use utoipa::openapi::link::LinkBuilder;
use utoipa::openapi::{OpenApi, RefOr};

/// The OpenAPI document's fixed parts; the paths and schemas come from the handlers.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "yuxi-operator facade",
        description = "Yuxi-compatible agent CRUD, the subagent tools for parent agents, and runs."
    ),
    modifiers(&BearerAuth),
    components(schemas(crate::facade::http::error::DetailItem)),
    tags(
        (name = "agents", description = "Agents and subagents (`/api/agent`)"),
        (name = "tools", description = "The subagent tools a parent agent calls"),
        (name = "runs", description = "Runs, their events and results, queued requests, and thread messages"),
        (name = "chat", description = "Conversations (Yuxi's chat threads): create, list, retitle, delete, history"),
        (name = "auth", description = "Who the bearer token names"),
        (name = "catalogue", description = "The tools, MCP servers and skills agents may be given"),
        (name = "files", description = "The users' files, read-only: a conversation's and the personal workspace"),
        (name = "system", description = "What the login page and the settings read, without a token"),
        (name = "placeholders", description = "Pages whose features this system has not, answered empty")
    )
)]
pub(super) struct ApiDoc;

/// Declares the bearer-token security scheme the paths name.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The rules of an agent body that the types alone do not state, from the Agent's validation
/// (`crate::resources::validation::validate_agent`): the lengths of its texts, the slug's form, the known
/// backends, and, for a new agent, how `is_subagent`, `backend_id` and the subagent allowlist go
/// together (an update's are judged with the stored agent, which the document cannot know). Applied to
/// the document as JSON (`const`, `enum` of `null` and schemas without a type are JSON Schema that
/// utoipa's types do not hold).
pub(super) fn agent_rules(document: &mut serde_json::Value) {
    use crate::facade::features::agents::view::{MAX_ICON_CHARS, MAX_PIC_CHARS, MAX_PICS};
    use crate::resources::{BACKEND_CHATBOT, BACKEND_SUBAGENT, BACKENDS};
    let fields = json!({"properties": {
        "name": {"maxLength": 200},
        "description": {"maxLength": 4096},
        "backend_id": {"enum": BACKENDS},
        "slug": {"pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
        "icon": {"maxLength": MAX_ICON_CHARS},
        "pics": {"maxItems": MAX_PICS, "items": {"maxLength": MAX_PIC_CHARS}},
    }});
    let new_agent = [
        // `is_subagent: true` needs the subagent backend...
        json!({"anyOf": [
            {"properties": {"is_subagent": {"enum": [false, null]}}},
            {"required": ["backend_id"], "properties": {"backend_id": {"const": BACKEND_SUBAGENT}}},
        ]}),
        // ...and `is_subagent: false` the other one (the default backend).
        json!({"anyOf": [
            {"properties": {"is_subagent": {"enum": [true, null]}}},
            {"properties": {"backend_id": {"const": BACKEND_CHATBOT}}},
        ]}),
        // A subagent has no subagents of its own.
        json!({"anyOf": [
            {"properties": {"backend_id": {"const": BACKEND_CHATBOT}}},
            {"properties": {"config_json": {"anyOf": [
                {"type": "null"},
                {"properties": {"context": {"properties": {"subagents": {"type": "null"}}}}},
            ]}}},
        ]}),
    ];
    let mut rules = vec![fields.clone()];
    rules.extend(new_agent);
    add_rules(document, "CreateAgent", rules);
    add_rules(document, "UpdateAgent", vec![fields]);
    // A list of names: at most 256, each 1 to 128 characters, none twice.
    let names = json!({"maxItems": 256, "uniqueItems": true, "items": {"minLength": 1, "maxLength": 128}});
    let context = json!({"properties": {
        "system_prompt": {"maxLength": 65536},
        "model": {"maxLength": 256},
        "tools": names, "knowledges": names, "mcps": names, "skills": names, "preload_skills": names,
        "subagents": {"maxItems": 256, "uniqueItems": true,
            "items": {"pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}},
        "max_execution_steps": {"minimum": 1, "maximum": 10000},
        "model_retry_times": {"maximum": 10},
    }});
    add_rules(document, "YuxiContext", vec![context]);
    let scope = [
        json!({"properties": {"department_ids": {"maxItems": 256, "uniqueItems": true}, "user_uids": names}}),
        // A department scope names departments, a user scope users.
        json!({"anyOf": [
            {"properties": {"access_level": {"enum": ["global", "user"]}}},
            {"required": ["department_ids"], "properties": {"department_ids": {"minItems": 1}}},
        ]}),
        json!({"anyOf": [
            {"properties": {"access_level": {"enum": ["global", "department"]}}},
            {"required": ["user_uids"], "properties": {"user_uids": {"minItems": 1}}},
        ]}),
    ];
    add_rules(document, "YuxiScope", scope.into());
    // Whoever may manage may read: no manage scope without a read scope (and the one within the other,
    // which the document cannot state).
    let share = json!({"anyOf": [
        {"properties": {"manage_scope": {"type": "null"}}},
        {"required": ["read_scope"], "properties": {"read_scope": {"type": "object"}}},
    ]});
    add_rules(document, "YuxiShare", vec![share]);
    // No run asks a question yet: a start's `resume` can only be null.
    add_rules(document, "StartRun", vec![json!({"properties": {"resume": {"type": "null"}}})]);
}

/// Makes the component schema `name` the `allOf` of itself and `rules`.
fn add_rules(document: &mut serde_json::Value, name: &str, rules: Vec<serde_json::Value>) {
    let schema =
        document.pointer_mut(&format!("/components/schemas/{name}")).unwrap_or_else(|| panic!("no schema {name:?}"));
    let mut all = vec![schema.take()];
    all.extend(rules);
    *schema = json!({"allOf": all});
}

/// The links from the answers that name a run to the routes that take its id.
pub(super) fn links(document: &mut OpenApi) {
    let by_path = |operation_id: &str| LinkBuilder::new().operation_id(operation_id);
    let run_id = "$response.body#/run_id";
    let parent_links = [
        ("GetRun", by_path("get_run").parameter("run_id", run_id)),
        ("GetRunResult", by_path("get_run_result").parameter("run_id", run_id)),
        ("StreamRunEvents", by_path("stream_run_events").parameter("run_id", run_id)),
        ("CancelRun", by_path("cancel_run").parameter("run_id", run_id)),
        ("GetThreadMessages", by_path("get_thread_messages").parameter("thread_id", "$response.body#/thread_id")),
    ];
    add_links(document, "start_run", parent_links.into_iter().map(|(name, link)| (name, link.build())));
    // The run-id tools take the run and the parent run that started it, both in the answer.
    let body = |extra: serde_json::Value| {
        let mut body = json!({"run_id": run_id, "parent": {"run_id": "$response.body#/created_by_run_id"}});
        if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
            body.extend(extra.clone());
        }
        body
    };
    let tool_links = [
        ("SubagentStatus", by_path("subagent_status").request_body(Some(body(json!({}))))),
        ("SubagentAwait", by_path("subagent_await").request_body(Some(body(json!({"timeout_seconds": 5}))))),
        ("SubagentEvents", by_path("subagent_events").request_body(Some(body(json!({}))))),
        ("SubagentCancel", by_path("subagent_cancel").request_body(Some(body(json!({}))))),
        ("GetRun", by_path("get_run").parameter("run_id", run_id)),
    ];
    add_links(document, "subagent_start", tool_links.into_iter().map(|(name, link)| (name, link.build())));
}

/// Adds `links` to the 200 answer of the operation `operation_id`, which must exist.
fn add_links(
    document: &mut OpenApi,
    operation_id: &str,
    links: impl Iterator<Item = (&'static str, utoipa::openapi::link::Link)>,
) {
    let operation = document
        .paths
        .paths
        .values_mut()
        .flat_map(|item| [&mut item.get, &mut item.post].into_iter().flatten())
        .find(|operation| operation.operation_id.as_deref() == Some(operation_id));
    let operation = operation.unwrap_or_else(|| panic!("no operation {operation_id:?} to link from"));
    let Some(RefOr::T(answer)) = operation.responses.responses.get_mut("200") else {
        panic!("{operation_id:?} has no 200 answer to link from")
    };
    for (name, link) in links {
        answer.links.insert(name.to_string(), RefOr::T(link));
    }
}
