//! The local mode behaves as the operator does: it follows its manifests folder while it serves (a file
//! created, changed or deleted is applied; one that does not validate is reported and its last good
//! version stays in force; a run under way keeps its Agent), it refuses an Agent's names that resolve
//! to nothing, naming the field and the value, and it says plainly when its data folder goes.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::extra_agents::{main_agent, start_with};
use crate::support::local_mode::{Local, LocalStore};

/// How long a change may take to show before a test gives up (the local mode applies one within a
/// second; the bound leaves room for a loaded machine).
const BOUND: Duration = Duration::from_secs(10);

fn agent(slug: &str, description: &str, tools: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: ChatbotAgent\n  description: {description}\n  context: {{tools: {tools}, subagents: []}}\n  share: {{readScope: {{accessLevel: Global}}}}\n"
    )
}

/// `GET /api/agent?include_subagents=true` as the administrator.
async fn listing(local: &Local) -> Value {
    local.get_json("/api/agent?include_subagents=true", "admin-token").await
}

fn described(listing: &Value, slug: &str) -> Option<String> {
    let agents = listing["agents"].as_array().expect("agents");
    agents.iter().find(|a| a["slug"] == slug).map(|a| a["description"].as_str().unwrap_or_default().to_string())
}

/// Polls the listing until `holds`, at most [`BOUND`]; returns it and how long it took.
async fn until(local: &Local, what: &str, holds: impl Fn(&Value) -> bool) -> (Value, Duration) {
    let started = Instant::now();
    loop {
        let listing = listing(local).await;
        if holds(&listing) {
            return (listing, started.elapsed());
        }
        assert!(started.elapsed() < BOUND, "{what}: not seen within {BOUND:?}: {listing}\n{}", local.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_manifest_changed_created_or_deleted_while_the_local_mode_serves_is_applied() {
    let (local, manifests) =
        start_with(LocalStore::InProcess, TempDir::new().expect("dir"), &[("live", &main_agent("live"))], &[]).await;
    let file = manifests.path().join("live.yaml");
    std::fs::write(&file, agent("live", "second version", "[ls, read_file]")).expect("edit");
    let (_, took) = until(&local, "the edit", |l| described(l, "live").as_deref() == Some("second version")).await;
    eprintln!("an edited manifest was applied after {took:?}");

    std::fs::write(manifests.path().join("fresh.yaml"), agent("fresh", "new file", "[ls]")).expect("create");
    until(&local, "the new file", |l| described(l, "fresh").is_some()).await;

    std::fs::remove_file(&file).expect("delete");
    let (listing, _) = until(&local, "the deletion", |l| described(l, "live").is_none()).await;
    assert!(described(&listing, "fresh").is_some(), "the other files stay: {listing}");
    assert_eq!(listing["manifests"]["problems"], json!([]), "{listing}");
}

#[tokio::test]
async fn a_manifest_that_does_not_validate_is_reported_and_its_last_good_version_stays_in_force() {
    let (local, manifests) = start_with(
        LocalStore::InProcess,
        TempDir::new().expect("dir"),
        &[("live", &agent("live", "good version", "[ls]"))],
        &[],
    )
    .await;
    let file = manifests.path().join("live.yaml");
    std::fs::write(&file, agent("live", "broken version", "[ls, read_fiel]")).expect("edit");
    let (listing, _) =
        until(&local, "the report", |l| l["manifests"]["problems"].as_array().is_some_and(|p| !p.is_empty())).await;
    let problem = &listing["manifests"]["problems"][0];
    assert_eq!(problem["file"], file.display().to_string(), "{problem}");
    assert_eq!(problem["last_good_in_force"], true, "{problem}");
    let error = problem["errors"][0].as_str().expect("an error");
    assert!(error.contains("spec.context.tools[1]"), "{error}");
    assert!(error.contains("did you mean \"read_file\"?"), "{error}");
    assert_eq!(described(&listing, "live").as_deref(), Some("good version"), "the last good version is served");
    assert!(local.log().contains("a manifest was not applied"), "logged: {}", local.log());
    // An ordinary user is not shown the folder's files.
    let bob = local.get_json("/api/agent", "bob-token").await;
    assert!(bob.get("manifests").is_none(), "{bob}");

    // A broken file never takes a valid one with it; fixing it puts it in force and clears the report.
    std::fs::write(&file, agent("live", "fixed version", "[ls, read_file]")).expect("fix");
    let (listing, _) = until(&local, "the fix", |l| described(l, "live").as_deref() == Some("fixed version")).await;
    assert_eq!(listing["manifests"]["problems"], json!([]), "{listing}");

    // A file that never validated puts nothing in force.
    std::fs::write(manifests.path().join("never.yaml"), agent("never", "x", "[nope]")).expect("create");
    let (listing, _) =
        until(&local, "the new broken file", |l| l["manifests"]["problems"].as_array().is_some_and(|p| !p.is_empty()))
            .await;
    assert_eq!(listing["manifests"]["problems"][0]["last_good_in_force"], false, "{listing}");
    assert!(described(&listing, "never").is_none(), "{listing}");
}

#[tokio::test]
async fn a_run_under_way_keeps_the_agent_it_started_with_when_its_file_goes() {
    let script = "- delay_ms: 3000\n  content: the first version answered\n";
    let (local, manifests) = start_with(
        LocalStore::InProcess,
        TempDir::new().expect("dir"),
        &[("slow", &main_agent("slow"))],
        &[("slow", script)],
    )
    .await;
    let run_id = local.start_run("alice-token", &[], json!({"query": "go", "agent_slug": "slow"})).await;
    std::fs::remove_file(manifests.path().join("slow.yaml")).expect("delete");
    until(&local, "the deletion", |l| described(l, "slow").is_none()).await;
    let result = local.result_of(&run_id, "alice-token").await;
    assert_eq!(result["status"], "completed", "{result}");
    assert!(result.to_string().contains("the first version answered"), "{result}");
}

#[tokio::test]
async fn the_facade_refuses_an_agents_unknown_names_naming_the_field_and_only_what_the_writer_may_use() {
    let (local, _manifests) = start_with(LocalStore::InProcess, TempDir::new().expect("dir"), &[], &[]).await;
    let create = |context: Value| {
        let client = local.client.clone();
        let url = format!("{}/api/agent", local.base);
        async move {
            let response = client
                .post(url)
                .bearer_auth("bob-token")
                .json(&json!({"name": "Bob's", "config_json": {"context": context}}))
                .send()
                .await
                .expect("reaches");
            (response.status().as_u16(), response.json::<Value>().await.expect("JSON"))
        }
    };
    let cases = [
        (json!({"tools": ["read_fiel"]}), "tools[0]", "did you mean \"read_file\"?"),
        (json!({"knowledges": ["research-note"]}), "knowledges[0]", "did you mean \"research-notes\"?"),
        (json!({"skills": ["report-writin"]}), "skills[0]", "did you mean \"report-writing\"?"),
        (json!({"subagents": ["research-explorr"]}), "subagents[0]", "did you mean \"research-explorer\"?"),
        (json!({"mcps": ["no-such-server"]}), "mcps[0]", "no MCP server \"no-such-server\""),
        (json!({"model": "no-such-model"}), "model", "no Model \"no-such-model\""),
        (json!({"model": "opneai/gpt-4o"}), "model", "did you mean \"openai\"?"),
    ];
    for (context, field, hint) in cases {
        let (status, body) = create(context.clone()).await;
        assert_eq!(status, 422, "{context}: {body}");
        let said = body["message"].as_str().expect("message");
        assert!(said.contains(field) && said.contains(hint), "{context}: {said}");
    }
    // Alice's own subagent is hers: to Bob it is as missing as a name nobody made, and never listed.
    let made = local
        .client
        .post(format!("{}/api/agent", local.base))
        .bearer_auth("alice-token")
        .json(&json!({"name": "Alice helper", "backend_id": "SubAgentBackend"}))
        .send()
        .await
        .expect("create");
    assert_eq!(made.status(), 201);
    let (status, body) = create(json!({"subagents": ["alice-helper"]})).await;
    assert_eq!(status, 422, "{body}");
    let said = body["message"].as_str().expect("message");
    let listed = said.split_once("known:").map(|(_, known)| known).expect("the known names");
    assert!(!listed.contains("alice-helper"), "{said}");
    let (_, missing) = create(json!({"subagents": ["alice-helpex"]})).await;
    assert_eq!(
        missing["message"].as_str().expect("message").replace("alice-helpex", "alice-helper"),
        said,
        "a stranger's object answers as a missing one"
    );
    let (status, body) =
        create(json!({"tools": ["read_file"], "knowledges": ["research-notes"], "subagents": ["research-explorer"]}))
            .await;
    assert_eq!(status, 201, "known names pass: {body}");
}

#[tokio::test]
async fn a_data_folder_deleted_under_the_local_mode_turns_it_not_ready_and_refuses_writes_naming_it() {
    let (local, _manifests) = start_with(LocalStore::InProcess, TempDir::new().expect("dir"), &[], &[]).await;
    let ready = local.client.get(format!("{}/readyz", local.base)).send().await.expect("readyz");
    assert_eq!(ready.status(), 200);
    let folder = local.data.path().canonicalize().expect("folder");
    std::fs::remove_dir_all(&folder).expect("delete the data folder");
    let started = Instant::now();
    let body = loop {
        let ready = local.client.get(format!("{}/readyz", local.base)).send().await.expect("readyz");
        if ready.status() == 503 {
            break ready.text().await.expect("text");
        }
        assert!(started.elapsed() < BOUND, "still ready: {}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let named = format!("the data folder {} is gone", folder.display());
    assert!(body.contains(&named), "{body}");
    let created = local
        .client
        .post(format!("{}/api/agent", local.base))
        .bearer_auth("bob-token")
        .json(&json!({"name": "Lost"}))
        .send()
        .await
        .expect("create");
    assert_eq!(created.status(), 503);
    let said = created.text().await.expect("text");
    assert!(said.contains(&named) && !said.to_lowercase().contains("lock"), "{said}");
    assert!(!folder.exists(), "nothing began a new data folder");
    assert!(local.log().contains(&named), "the log names the folder: {}", local.log());
}

#[tokio::test]
async fn a_data_folder_made_read_only_turns_the_local_mode_not_ready_until_it_is_writable_again() {
    use std::os::unix::fs::PermissionsExt;
    if nix_is_root() {
        eprintln!("skipped: root writes into a read-only folder");
        return;
    }
    let (local, _manifests) = start_with(LocalStore::InProcess, TempDir::new().expect("dir"), &[], &[]).await;
    let folder = local.data.path().to_path_buf();
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o500)).expect("read-only");
    let status = |local: &Local| {
        let client = local.client.clone();
        let url = format!("{}/readyz", local.base);
        async move { client.get(url).send().await.expect("readyz").status().as_u16() }
    };
    let started = Instant::now();
    while status(&local).await != 503 {
        assert!(started.elapsed() < BOUND, "still ready: {}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).expect("writable");
    while status(&local).await != 200 {
        assert!(started.elapsed() < 2 * BOUND, "not ready again: {}", local.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(local.log().contains("is not writable"), "{}", local.log());
}

/// Whether the tests run as root (who may write into any folder).
fn nix_is_root() -> bool {
    // SAFETY: geteuid(2) reads this process's effective user id.
    unsafe { libc::geteuid() == 0 }
}

#[tokio::test]
async fn a_manifests_folder_deleted_keeps_what_was_in_force_and_is_followed_again_once_it_is_back() {
    let (local, manifests) = start_with(
        LocalStore::InProcess,
        TempDir::new().expect("dir"),
        &[("live", &agent("live", "before", "[ls]"))],
        &[],
    )
    .await;
    let folder = manifests.path().to_path_buf();
    let kept = TempDir::new().expect("dir");
    for entry in std::fs::read_dir(&folder).expect("read") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, kept.path().join(path.file_name().expect("name"))).expect("copy");
    }
    std::fs::remove_dir_all(&folder).expect("delete the folder");
    let (listing, _) = until(&local, "the folder's absence", |l| {
        l["manifests"]["problems"].to_string().contains("is gone; what was in force stays")
    })
    .await;
    assert_eq!(described(&listing, "live").as_deref(), Some("before"), "what was in force stays: {listing}");
    assert!(described(&listing, "research-explorer").is_some(), "{listing}");
    // Made again, the folder is followed again: an edit there is applied.
    std::fs::create_dir(&folder).expect("again");
    for entry in std::fs::read_dir(kept.path()).expect("read") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, folder.join(path.file_name().expect("name"))).expect("copy");
    }
    until(&local, "the folder back", |l| l["manifests"]["problems"] == json!([])).await;
    std::fs::write(folder.join("live.yaml"), agent("live", "after", "[ls]")).expect("edit");
    until(&local, "an edit in the folder made again", |l| described(l, "live").as_deref() == Some("after")).await;
}

#[tokio::test]
async fn a_name_longer_than_any_name_is_refused_by_its_length_without_being_repeated() {
    let (local, _manifests) = start_with(LocalStore::InProcess, TempDir::new().expect("dir"), &[], &[]).await;
    let long = "y".repeat(1_000_000);
    for field in ["subagents", "tools", "knowledges", "skills"] {
        let response = local
            .client
            .post(format!("{}/api/agent", local.base))
            .bearer_auth("bob-token")
            .json(&json!({"name": "Long", "config_json": {"context": {field: [long]}}}))
            .send()
            .await
            .expect("create");
        assert_eq!(response.status(), 422, "{field}");
        let said = response.text().await.expect("text");
        assert!(said.len() < 4096, "{field}: an answer of {} bytes", said.len());
        assert!(said.contains("must be at most"), "{field}: {said}");
    }
}
