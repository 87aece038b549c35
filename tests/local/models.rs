//! Models as resources in the local mode: a run of an Agent on a Model uses that Model's key (read from
//! `YUXI_SECRET_*`) and no other — not the installation's `OPENAI_API_KEY` — and a user outside the
//! Model's share is refused with 403 naming `model_spec`, whether the request names the Model or the
//! agent does; the model picker lists the Model to whom it is shared with only. In process and with
//! `--runner-processes` (where the key travels as a pod's would, in the runner's variables).

use serde_json::{Value, json};
use tempfile::TempDir;

use crate::support::local_mode::{Local, LocalStore, command_over, free_port, launch};
use crate::support::openai_endpoint::{FakeOpenAi, Reply};
use crate::support::repository::yaml_files;

const TEAM_KEY: &str = "sk-team-a-7c1e0f";
const INSTALLATION_KEY: &str = "sk-installation-93d2";

fn manifests(endpoint: &FakeOpenAi) -> TempDir {
    let dir = TempDir::new().expect("dir");
    for file in yaml_files("examples") {
        std::fs::copy(&file, dir.path().join(file.file_name().expect("name"))).expect("copy");
    }
    let model = format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Model\nmetadata: {{name: team-a-model}}\nspec:\n  provider: OpenAICompatible\n  preset: vllm\n  model: qwen3-8b\n  baseURL: {}\n  apiKeySecretRef: {{name: team-a-keys, key: api-key}}\n  pricing: {{currency: CNY, inputPerMillion: \"2\", outputPerMillion: \"3\"}}\n  share: {{readScope: {{accessLevel: User, userUids: [alice]}}}}\n",
        endpoint.base_url
    );
    let agent = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: team-a-writer}\nspec:\n  backend: ChatbotAgent\n  context: {model: team-a-model, subagents: []}\n  share: {readScope: {accessLevel: Global}}\n";
    std::fs::write(dir.path().join("team-a-model.yaml"), model).expect("write");
    std::fs::write(dir.path().join("team-a-writer.yaml"), agent).expect("write");
    let saver = "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: team-a-saver}\nspec:\n  backend: ChatbotAgent\n  context: {model: team-a-model, subagents: []}\n  budget: {maxCost: {currency: CNY, amount: \"0.00005\"}}\n  share: {readScope: {accessLevel: Global}}\n";
    std::fs::write(dir.path().join("team-a-saver.yaml"), saver).expect("write");
    dir
}

async fn system(endpoint: &FakeOpenAi, processes: bool) -> (Local, TempDir) {
    let manifests = manifests(endpoint);
    let port = free_port();
    let data = TempDir::new().expect("dir");
    let mut command = command_over(manifests.path(), LocalStore::InProcess, port, data.path());
    command
        .env("YUXI_SECRET_TEAM_A_KEYS_API_KEY", TEAM_KEY)
        // The installation's own endpoint and key: a run on the Model must use neither.
        .env("OPENAI_BASE_URL", &endpoint.base_url)
        .env("OPENAI_API_KEY", INSTALLATION_KEY);
    if processes {
        command.arg("--runner-processes");
    }
    (launch(command, port, data, TempDir::new().expect("dir")).await, manifests)
}

async fn post(local: &Local, token: &str, body: Value) -> (u16, Value) {
    let response = local
        .client
        .post(format!("{}/api/agent/runs", local.base))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .expect("reaches");
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

async fn result(local: &Local, run_id: &str) -> Value {
    local.result_of(run_id, "alice-token").await
}

async fn a_run_on_a_model_uses_its_key_and_no_other(processes: bool) {
    let endpoint = FakeOpenAi::start(vec![Reply::text(&["Hello ", "from team A."])]).await;
    let (local, _manifests) = system(&endpoint, processes).await;
    let (status, started) = post(&local, "alice-token", json!({"query": "hi", "agent_slug": "team-a-writer"})).await;
    assert_eq!(status, 200, "{started}");
    let ended = result(&local, started["run_id"].as_str().expect("run_id")).await;
    assert_eq!(ended["status"], "completed", "{ended}\n{}", local.log());
    assert_eq!(ended["output"], "Hello from team A.");
    assert_eq!(endpoint.authorizations(), [format!("Bearer {TEAM_KEY}")]);
    assert_eq!(endpoint.requests()[0]["model"], "qwen3-8b");
    assert!(!local.log().contains(TEAM_KEY), "the key is in the log");
}

#[tokio::test]
async fn a_run_on_a_model_uses_its_key_and_no_other_in_process() {
    a_run_on_a_model_uses_its_key_and_no_other(false).await;
}

#[tokio::test]
async fn a_run_on_a_model_uses_its_key_and_no_other_in_a_runner_process() {
    a_run_on_a_model_uses_its_key_and_no_other(true).await;
}

#[tokio::test]
async fn a_user_outside_the_models_share_is_refused_naming_model_spec() {
    let endpoint = FakeOpenAi::start(Vec::new()).await;
    let (local, _manifests) = system(&endpoint, false).await;
    // Bob may use the agent, not its Model.
    let (status, refused) = post(&local, "bob-token", json!({"query": "hi", "agent_slug": "team-a-writer"})).await;
    assert_eq!(status, 403, "{refused}");
    assert!(refused.to_string().contains("model_spec"), "{refused}");
    // Naming it, or naming a Model that does not exist, answers alike.
    let named = json!({"query": "hi", "agent_slug": "team-a-writer", "model_spec": "team-a-model"});
    let missing = json!({"query": "hi", "agent_slug": "team-a-writer", "model_spec": "no-such-model"});
    let (a, named) = post(&local, "bob-token", named).await;
    let (b, missing) = post(&local, "bob-token", missing).await;
    assert_eq!((a, b), (403, 403), "{named} {missing}");
    let strip = |v: &Value| v.to_string().replace("team-a-model", "X").replace("no-such-model", "X");
    assert_eq!(strip(&named), strip(&missing));
    assert!(endpoint.requests().is_empty(), "nothing reached the Model");
    // The picker shows the Model to Alice, not to Bob.
    let listed = |token: &'static str| {
        let local = &local;
        async move {
            let response = local
                .client
                .get(format!("{}/api/system/model-providers/models/v2?model_type=chat", local.base))
                .bearer_auth(token)
                .send()
                .await
                .expect("reaches");
            let body: Value = response.json().await.expect("json");
            body["data"]["models"]["models"].as_array().cloned().unwrap_or_default()
        }
    };
    let alices = listed("alice-token").await;
    assert_eq!(alices.iter().map(|m| m["spec"].clone()).collect::<Vec<_>>(), [json!("team-a-model")]);
    assert!(listed("bob-token").await.is_empty());
}

#[tokio::test]
async fn a_runs_cost_is_priced_by_its_model_and_a_cost_budget_stops_the_tree() {
    // Each reply of the stand-in reports 10 prompt and 5 completion tokens: 10 × 2 + 5 × 3 = 35
    // millionths of a yuan a call.
    let endpoint = FakeOpenAi::start(vec![
        Reply::text(&["priced"]),
        Reply::tool_call("ls", r#"{"path": "/home/gem/user-data/workspace"}"#),
        Reply::text(&["never read: the budget stops the tree first"]),
    ])
    .await;
    let (local, _manifests) = system(&endpoint, false).await;
    let (_, started) = post(&local, "alice-token", json!({"query": "hi", "agent_slug": "team-a-writer"})).await;
    let ended = result(&local, started["run_id"].as_str().expect("run_id")).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert_eq!(ended["tree_cost"], json!([{"currency": "CNY", "amount": "0.000035"}]));
    // The saver's trees may cost 0.00005 yuan: its second call (0.00007 in all) is its last.
    let (_, started) = post(&local, "alice-token", json!({"query": "hi", "agent_slug": "team-a-saver"})).await;
    let ended = result(&local, started["run_id"].as_str().expect("run_id")).await;
    assert_eq!(
        (ended["status"].as_str(), ended["reason"].as_str()),
        (Some("failed"), Some("BudgetExceeded")),
        "{ended}"
    );
    assert_eq!(ended["error"], "the run tree cost 0.000070 CNY of its budget of 0.000050 CNY (spec.budget.maxCost)");
    assert_eq!(ended["tree_cost"], json!([{"currency": "CNY", "amount": "0.000070"}]));
    assert_eq!(endpoint.requests().len(), 3, "no call after the budget was reached");
    // The totals, with the Model unnamed: it is not shared with everyone.
    let metrics = local.client.get(format!("{}/metrics", local.base)).send().await.expect("reaches");
    let text = metrics.text().await.expect("text");
    assert!(
        text.contains(r#"yuxi_model_cost_total{namespace="default",model="(private)",currency="CNY"} 0.000105"#),
        "{text}"
    );
    assert!(
        text.contains(r#"yuxi_model_tokens_total{namespace="default",model="(private)",kind="prompt"} 30"#),
        "{text}"
    );
    assert!(!text.contains("team-a-model"), "a private Model's name is in the metrics");
}

/// A Model file changed while the local mode serves (another endpoint, another model) is connected
/// again: the next run uses the new endpoint and model, the former endpoint hears nothing more.
async fn a_model_changed_while_serving_is_used_by_the_next_run(processes: bool) {
    let former = FakeOpenAi::start(vec![]).await;
    let (local, manifests) = system(&former, processes).await;
    let current = FakeOpenAi::start(vec![Reply::text(&["from ", "the new endpoint"])]).await;
    let file = manifests.path().join("team-a-model.yaml");
    let text = std::fs::read_to_string(&file).expect("read");
    let changed = text.replace(&former.base_url, &current.base_url).replace("qwen3-8b", "qwen3-32b");
    std::fs::write(&file, changed).expect("edit");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let picker = local.get_json("/api/system/model-providers/models/v2", "alice-token").await;
        if picker.to_string().contains("qwen3-32b") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the Model change was not applied: {picker}\n{}", local.log());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (status, started) = post(&local, "alice-token", json!({"query": "hi", "agent_slug": "team-a-writer"})).await;
    assert_eq!(status, 200, "{started}");
    let ended = result(&local, started["run_id"].as_str().expect("run_id")).await;
    assert_eq!(ended["status"], "completed", "{ended}\n{}", local.log());
    assert_eq!(ended["output"], "from the new endpoint");
    assert_eq!(current.requests()[0]["model"], "qwen3-32b");
    assert_eq!(current.authorizations(), [format!("Bearer {TEAM_KEY}")]);
    assert!(former.requests().is_empty(), "the former endpoint was asked: {:?}", former.requests());
}

#[tokio::test]
async fn a_model_changed_while_serving_is_used_by_the_next_run_in_process() {
    a_model_changed_while_serving_is_used_by_the_next_run(false).await;
}

#[tokio::test]
async fn a_model_changed_while_serving_is_used_by_the_next_run_in_runner_processes() {
    a_model_changed_while_serving_is_used_by_the_next_run(true).await;
}
