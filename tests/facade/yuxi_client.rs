//! The agent management flows of Yuxi's own web client, over real HTTP: the `{agent: ...}` answers,
//! `configurable_items`, the admin-only context fields, the default agent, icons and pictures, slugs of
//! names in any script, and the tool, MCP server and skill lists.

use serde_json::{Value, json};

use crate::facade_agents::{start, start_with_mcp_servers};

fn keys(object: &Value) -> Vec<&str> {
    object.as_object().expect("an object").keys().map(String::as_str).collect()
}

fn option_keys(item: &Value) -> Vec<&str> {
    item["options"].as_array().expect("options").iter().map(|o| o["key"].as_str().expect("key")).collect()
}

#[tokio::test]
async fn create_get_and_update_answer_the_agent_under_agent_as_yuxi_does() {
    let api = start().await;
    let (status, created) = api.send("POST", "/api/agent", "alice-token", json!({"name": "Notes"})).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["agent"]["slug"], "notes");
    assert!(created["agent"]["configurable_items"].is_object(), "{created}");
    let (status, got) = api.get("/api/agent/notes", "alice-token").await;
    assert_eq!((status, got["agent"]["slug"].as_str()), (200, Some("notes")));
    let (status, updated) =
        api.send("PUT", "/api/agent/notes", "alice-token", json!({"description": "short notes"})).await;
    assert_eq!(status, 200, "{updated}");
    assert_eq!(updated["agent"]["description"], "short notes");
    assert!(updated["agent"]["configurable_items"]["model"].is_object(), "{updated}");
    let (_, list) = api.get("/api/agent", "alice-token").await;
    let listed = list["agents"].as_array().expect("agents").iter().find(|a| a["slug"] == "notes").expect("listed");
    assert!(listed.get("configurable_items").is_none(), "list items carry no configurable_items, as in Yuxi");
}

#[tokio::test]
async fn the_detail_describes_every_context_field_with_its_choices_for_the_caller() {
    let api = start().await;
    let (_, admin) = api.get("/api/agent/deep-research", "admin-token").await;
    let items = &admin["agent"]["configurable_items"];
    let mut fields = keys(items);
    fields.sort();
    assert_eq!(
        fields,
        [
            "approval_required",
            "approval_timeout_seconds",
            "knowledges",
            "max_execution_steps",
            "mcp_tools",
            "mcps",
            "model",
            "model_retry_times",
            "preload_skills",
            "skills",
            "subagents",
            "summary_keep_messages",
            "summary_l2_trigger_ratio",
            "summary_prompt",
            "summary_threshold",
            "summary_tool_result_token_limit",
            "system_prompt",
            "tool_approval_mode",
            "tool_approval_mode_locked",
            "tools",
        ]
    );
    assert_eq!(items["model"]["kind"], "llm");
    assert_eq!(items["system_prompt"]["kind"], "prompt");
    assert_eq!(
        (items["tool_approval_mode"]["type"].as_str(), items["tool_approval_mode"]["auth"].as_str()),
        (Some("string"), Some("admin"))
    );
    assert_eq!(option_keys(&items["tool_approval_mode"]), ["default", "always_trust"]);
    assert_eq!(items["max_execution_steps"]["type"], "number");
    assert_eq!(items["max_execution_steps"]["default"], 300);
    assert_eq!(items["max_execution_steps"]["admin_only"], true);
    assert_eq!(items["summary_threshold"]["applied"], false);
    assert_eq!(option_keys(&items["tools"]), ["ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute"]);
    assert_eq!(items["tools"]["type"], "list");
    assert_eq!(
        option_keys(&items["subagents"]),
        ["fact-verifier", "general-purpose", "research-explorer"],
        "the subagents the caller may see"
    );
    assert_eq!(option_keys(&items["skills"]), ["claim-checking", "report-writing", "source-triage"]);
    assert!(items["system_prompt"]["description"].as_str().expect("description").contains("65536"));

    let (_, user) = api.get("/api/agent/deep-research", "bob-token").await;
    let user_fields = keys(&user["agent"]["configurable_items"]);
    assert!(
        !user_fields.contains(&"max_execution_steps")
            && !user_fields.contains(&"tool_approval_mode")
            && !user_fields.contains(&"tool_approval_mode_locked"),
        "{user_fields:?}"
    );
    assert!(user_fields.contains(&"tools"));
    let (_, sub) = api.get("/api/agent/research-explorer", "admin-token").await;
    assert!(!keys(&sub["agent"]["configurable_items"]).contains(&"subagents"), "a subagent has no subagents");
}

#[tokio::test]
async fn admin_only_fields_are_typed_bounded_and_reserved_to_administrators() {
    let api = start().await;
    let context = |c: Value| json!({"name": "Tuned", "config_json": {"context": c}});
    let bad = [
        (json!({"summary_threshold": 0}), "config_json.context.summary_threshold"),
        (json!({"summary_keep_messages": 5000}), "config_json.context.summary_keep_messages"),
        (json!({"summary_l2_trigger_ratio": 2.5}), "config_json.context.summary_l2_trigger_ratio"),
        (json!({"summary_tool_result_token_limit": 0}), "config_json.context.summary_tool_result_token_limit"),
        (json!({"summary_prompt": "summarise please"}), "config_json.context.summary_prompt"),
        (json!({"summary_threshold": "many"}), "config_json.context.summary_threshold"),
        (json!({"model_retry_times": 11}), "config_json.context.model_retry_times"),
    ];
    for (fields, field) in bad {
        let (status, answer) = api.send("POST", "/api/agent", "admin-token", context(fields.clone())).await;
        assert_eq!((status, answer["field"].as_str()), (422, Some(field)), "{fields} -> {answer}");
    }
    let (status, refused) =
        api.send("POST", "/api/agent", "alice-token", context(json!({"max_execution_steps": 20}))).await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused["message"].as_str().expect("message").starts_with("config_json.context.max_execution_steps"));

    let tuned = json!({"summary_threshold": 120, "summary_l2_trigger_ratio": 0.5, "max_execution_steps": 40,
                       "summary_prompt": "Summarise: {messages}"});
    let share = json!({"version": 2, "read_scope": {"access_level": "user", "user_uids": ["ops", "alice"]},
                       "manage_scope": {"access_level": "user", "user_uids": ["alice"]}});
    let mut body = context(tuned);
    body["share_config"] = share;
    let (status, created) = api.send("POST", "/api/agent", "admin-token", body).await;
    assert_eq!(status, 201, "{created}");
    let agent = &created["agent"];
    assert_eq!(agent["config_json"]["context"]["summary_threshold"], 120);
    assert_eq!(agent["not_applied"], json!(["summary_threshold", "summary_prompt", "summary_l2_trigger_ratio"]));

    // Alice manages it; her client leaves the admin-only fields out, which keeps them.
    let (status, saved) = api
        .send(
            "PUT",
            "/api/agent/tuned",
            "alice-token",
            json!({"config_json": {"context": {"system_prompt": "Be brief."}}}),
        )
        .await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(saved["agent"]["config_json"]["context"]["max_execution_steps"], 40);
    assert_eq!(saved["agent"]["config_json"]["context"]["system_prompt"], "Be brief.");
    let unchanged = json!({"config_json": {"context": {"max_execution_steps": 40}}});
    assert_eq!(
        api.send("PUT", "/api/agent/tuned", "alice-token", unchanged).await.0,
        200,
        "sending it back is no change"
    );
    let changed = json!({"config_json": {"context": {"max_execution_steps": 41}}});
    assert_eq!(api.send("PUT", "/api/agent/tuned", "alice-token", changed).await.0, 403);
}

#[tokio::test]
async fn set_default_moves_the_one_default_and_refuses_subagents() {
    let api = start().await;
    let global = json!({"version": 2, "read_scope": {"access_level": "global"}});
    let (status, _) =
        api.send("POST", "/api/agent", "admin-token", json!({"name": "Helpdesk", "share_config": global})).await;
    assert_eq!(status, 201);
    let (status, refused) = api.send("POST", "/api/agent/helpdesk/set_default", "alice-token", json!({})).await;
    assert_eq!((status, refused["code"].as_str()), (403, Some("forbidden")));
    let (status, sub) = api.send("POST", "/api/agent/research-explorer/set_default", "admin-token", json!({})).await;
    assert_eq!((status, sub["field"].as_str()), (422, Some("slug")), "{sub}");
    assert_eq!(api.send("POST", "/api/agent/nobody/set_default", "admin-token", json!({})).await.0, 404);

    let (status, set) = api.send("POST", "/api/agent/helpdesk/set_default", "admin-token", json!({})).await;
    assert_eq!(status, 200, "{set}");
    assert_eq!((set["agent"]["slug"].as_str(), set["agent"]["is_default"].as_bool()), (Some("helpdesk"), Some(true)));
    let (_, default) = api.get("/api/agent/default", "bob-token").await;
    assert_eq!(default["agent"]["slug"], "helpdesk");
    let (_, all) = api.get("/api/agent?include_subagents=true", "root-token").await;
    let defaults: Vec<&str> = all["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter(|a| a["is_default"] == true)
        .map(|a| a["slug"].as_str().expect("slug"))
        .collect();
    assert_eq!(defaults, ["helpdesk"], "exactly one default");
    assert_eq!(default["agent"]["updated_by"], "ops");

    // Creating an agent as the default moves the default too.
    let body = json!({"name": "Frontdesk", "set_default": true, "share_config": global});
    let (status, created) = api.send("POST", "/api/agent", "admin-token", body).await;
    assert_eq!((status, created["agent"]["is_default"].as_bool()), (201, Some(true)), "{created}");
    let (_, default) = api.get("/api/agent/default", "bob-token").await;
    assert_eq!(default["agent"]["slug"], "frontdesk");
    let (_, helpdesk) = api.get("/api/agent/helpdesk", "admin-token").await;
    assert_eq!(helpdesk["agent"]["is_default"], false);
}

#[tokio::test]
async fn icon_and_pics_are_kept_bounded_and_every_item_has_yuxi_fields() {
    let api = start().await;
    let body = json!({"name": "Pretty", "icon": "https://example.com/i.png", "pics": ["https://example.com/a.png"]});
    let (status, created) = api.send("POST", "/api/agent", "alice-token", body).await;
    assert_eq!(status, 201, "{created}");
    let agent = &created["agent"];
    assert_eq!(
        (agent["icon"].as_str(), &agent["pics"]),
        (Some("https://example.com/i.png"), &json!(["https://example.com/a.png"]))
    );
    for field in ["created_at", "updated_at"] {
        assert!(agent[field].as_str().is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok()), "{field}: {agent}");
    }
    assert_eq!((agent["updated_by"].as_str(), agent["permission_locked"].as_bool()), (Some("alice"), Some(false)));
    assert_eq!(agent["capabilities"], json!([]));
    let (_, cleared) = api.send("PUT", "/api/agent/pretty", "alice-token", json!({"icon": null})).await;
    assert_eq!(
        (&cleared["agent"]["icon"], &cleared["agent"]["pics"]),
        (&Value::Null, &json!(["https://example.com/a.png"]))
    );

    let (status, answer) = api.send("PUT", "/api/agent/pretty", "alice-token", json!({"pics": vec!["p"; 17]})).await;
    assert_eq!((status, answer["field"].as_str()), (422, Some("pics")), "{answer}");
    let (status, answer) =
        api.send("PUT", "/api/agent/pretty", "alice-token", json!({"icon": "x".repeat(16 * 1024 + 1)})).await;
    assert_eq!((status, answer["field"].as_str()), (422, Some("icon")), "{answer}");
    let (_, builtin) = api.get("/api/agent/general-purpose", "alice-token").await;
    assert_eq!(builtin["agent"]["permission_locked"], true);
    let (_, list) = api.get("/api/agent?include_subagents=true", "alice-token").await;
    for item in list["agents"].as_array().expect("agents") {
        for field in ["icon", "pics", "created_at", "updated_at", "updated_by", "permission_locked", "capabilities"] {
            assert!(item.get(field).is_some(), "{field} missing on {}", item["slug"]);
        }
    }
}

#[tokio::test]
async fn a_name_in_another_script_gets_a_transliterated_unique_slug() {
    let api = start().await;
    let (_, first) = api.send("POST", "/api/agent", "alice-token", json!({"name": "研究助手"})).await;
    assert_eq!(first["agent"]["slug"], "yan-jiu-zhu-shou");
    assert_eq!(first["agent"]["name"], "研究助手");
    let (_, second) = api.send("POST", "/api/agent", "alice-token", json!({"name": "研究助手"})).await;
    assert_eq!(second["agent"]["slug"], "yan-jiu-zhu-shou-2");
    let (status, symbols) = api.send("POST", "/api/agent", "alice-token", json!({"name": "！？"})).await;
    assert_eq!(status, 201, "{symbols}");
    let slug = symbols["agent"]["slug"].as_str().expect("slug");
    assert!(slug.starts_with("agent-") && slug.len() == 14, "{slug}");
}

#[tokio::test]
async fn the_tool_mcp_server_and_skill_lists_show_what_the_caller_may_see() {
    let api = start().await;
    let (status, tools) = api.get("/api/system/tools", "bob-token").await;
    assert_eq!((status, tools["success"].as_bool()), (200, Some(true)));
    let slugs: Vec<&str> =
        tools["data"].as_array().expect("data").iter().map(|t| t["slug"].as_str().expect("slug")).collect();
    assert!(slugs.starts_with(&["ls", "read_file", "write_file", "edit_file", "glob", "grep", "execute"]), "{slugs:?}");
    assert!(slugs.contains(&"task") && slugs.contains(&"subagent_start"), "{slugs:?}");
    let (_, builtin) = api.get("/api/system/tools?category=buildin", "bob-token").await;
    assert_eq!(builtin["data"].as_array().map(Vec::len), Some(7));

    let private = json!({"name": "Docs", "config_json": {"context": {"mcps": ["docs"], "skills": ["secret-notes"]}}});
    assert_eq!(api.send("POST", "/api/agent", "alice-token", private).await.0, 201);
    let names = |answer: &Value| -> Vec<String> {
        answer["data"].as_array().expect("data").iter().map(|i| i["slug"].as_str().expect("slug").to_string()).collect()
    };
    let (status, alice_mcps) = api.get("/api/system/mcp-servers", "alice-token").await;
    assert_eq!((status, names(&alice_mcps)), (200, vec!["docs".to_string()]));
    assert_eq!(alice_mcps["data"][0]["agents"], json!(["docs"]));
    let (_, bob_mcps) = api.get("/api/system/mcp-servers", "bob-token").await;
    assert!(names(&bob_mcps).is_empty(), "a stranger's agent's server is not listed");
    let (status, bob_skills) = api.get("/api/skills/accessible", "bob-token").await;
    assert_eq!(
        (status, names(&bob_skills)),
        (200, vec!["claim-checking".to_string(), "report-writing".into(), "source-triage".into()])
    );
    let (_, alice_skills) = api.get("/api/skills/accessible", "alice-token").await;
    assert!(names(&alice_skills).contains(&"secret-notes".to_string()));
    assert_eq!(api.call("GET", "/api/system/tools", None, None).await.0, 401);
}

/// An McpServer `name` shared by `share` (YAML), whose last discovery listed `tools` (`(name,
/// destructive)`).
fn listed_server(name: &str, share: &str, tools: &[(&str, bool)]) -> yuxi_operator::resources::mcp_server::McpServer {
    let mut server: yuxi_operator::resources::mcp_server::McpServer = serde_norway::from_str(&format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: McpServer\nmetadata: {{name: {name}, namespace: team-a}}\nspec: {{url: 'http://{name}/mcp', {share}}}"
    ))
    .expect("an McpServer");
    let tools: Vec<Value> = tools
        .iter()
        .map(|(tool, destructive)| json!({"name": tool, "description": format!("the {tool} tool"), "inputSchema": "{\"type\":\"object\"}", "destructive": destructive}))
        .collect();
    let ready = json!({"type": "Ready", "status": "True", "reason": "Listed", "message": "", "lastTransitionTime": "2026-12-05T10:00:00Z"});
    server.status = Some(
        serde_json::from_value(json!({"conditions": [ready], "tools": tools, "toolCount": tools.len(), "protocolVersion": "2026-07-28", "serverName": format!("{name} server")}))
            .expect("a status"),
    );
    server
}

#[tokio::test]
async fn mcp_servers_are_listed_from_the_resources_each_caller_may_use_with_the_tools_discovery_found() {
    let api = start_with_mcp_servers(vec![
        listed_server("docs", "", &[("search", false), ("purge", true)]),
        listed_server("ledger", "share: {readScope: {accessLevel: User, userUids: [bob]}}", &[("post_entry", true)]),
    ])
    .await;
    let (status, alice) = api.get("/api/system/mcp-servers", "alice-token").await;
    assert_eq!(status, 200, "{alice}");
    let docs = &alice["data"][0];
    assert_eq!(alice["data"].as_array().map(Vec::len), Some(1), "bob's ledger is not alice's: {alice}");
    assert_eq!(
        (&docs["slug"], &docs["name"], &docs["source"], &docs["status"], &docs["tool_count"], &docs["tools"]),
        (
            &json!("docs"),
            &json!("docs server"),
            &json!("resource"),
            &json!("ready"),
            &json!(2),
            &json!(["search", "purge"])
        )
    );
    let (_, bob) = api.get("/api/system/mcp-servers", "bob-token").await;
    let bob_names: Vec<&str> =
        bob["data"].as_array().expect("data").iter().map(|s| s["slug"].as_str().expect("slug")).collect();
    assert_eq!(bob_names, ["docs", "ledger"]);

    let (status, tools) = api.get("/api/system/mcp-servers/docs/tools", "alice-token").await;
    assert_eq!(status, 200, "{tools}");
    assert_eq!(tools["data"][1]["name"], "purge");
    assert_eq!((&tools["data"][1]["destructive"], &tools["data"][0]["destructive"]), (&json!(true), &json!(false)));
    assert_eq!(tools["data"][0]["input_schema"], json!({"type": "object"}));
    // Another user's server answers exactly as one that does not exist.
    let (stranger_status, stranger) = api.get("/api/system/mcp-servers/ledger/tools", "alice-token").await;
    let (missing_status, missing) = api.get("/api/system/mcp-servers/nowhere/tools", "alice-token").await;
    assert_eq!((stranger_status, missing_status), (404, 404));
    assert_eq!(stranger["code"], missing["code"]);
    assert_eq!(
        stranger["message"].as_str().map(|m| m.replace("ledger", "?")),
        missing["message"].as_str().map(|m| m.replace("nowhere", "?"))
    );
    let (status, bobs) = api.get("/api/system/mcp-servers/ledger/tools", "bob-token").await;
    assert_eq!((status, &bobs["data"][0]["name"]), (200, &json!("post_entry")));

    // The agent form's options are the same servers.
    let (_, created) = api.send("POST", "/api/agent", "alice-token", json!({"name": "Reader"})).await;
    let slug = created["agent"]["slug"].as_str().expect("slug").to_string();
    let (_, detail) = api.get(&format!("/api/agent/{slug}"), "alice-token").await;
    assert_eq!(option_keys(&detail["agent"]["configurable_items"]["mcps"]), ["docs"]);
}

#[tokio::test]
async fn an_agents_tool_allowlist_per_mcp_server_is_kept_in_yuxis_shape() {
    let api = start().await;
    let body =
        json!({"name": "Narrow", "config_json": {"context": {"mcps": ["docs"], "mcp_tools": {"docs": ["search"]}}}});
    let (status, created) = api.send("POST", "/api/agent", "alice-token", body).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["agent"]["config_json"]["context"]["mcp_tools"], json!({"docs": ["search"]}));
    let stray =
        json!({"name": "Stray", "config_json": {"context": {"mcps": ["docs"], "mcp_tools": {"wiki": ["search"]}}}});
    let (status, refused) = api.send("POST", "/api/agent", "alice-token", stray).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["field"], "config_json.context.mcp_tools[0].server", "{refused}");
}
