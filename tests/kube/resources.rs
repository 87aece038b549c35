//! The resources as a real API server takes them: the CRDs `make crds` writes are accepted (structural
//! schemas, CEL rules that compile within the server's cost budget) and established; every manifest of
//! `examples/` is admitted; every manifest of `examples/invalid/` is refused, by the layer its header
//! names, with the same field `yuxi-operator validate` names.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use std::path::Path;

use crate::install::{apply_json, installed, kubectl_ok, restricted_namespace, root};

/// The namespace the examples are applied in (outside the release's served namespaces: the webhook and
/// the CRDs cover every namespace).
const EXAMPLES: &str = "examples";

/// The YAML files directly in `dir` of the repository, sorted.
fn yaml_files(dir: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(root().join(dir))
        .expect("folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

/// The documents of a YAML file, as JSON.
fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).expect("readable");
    serde_norway::Deserializer::from_str(&text)
        .map(|doc| serde::Deserialize::deserialize(doc).expect("YAML"))
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// The API of the kind of `object` in `namespace`.
fn api_for(client: &kube::Client, object: &Value, namespace: &str) -> Api<DynamicObject> {
    let (group, version) = object["apiVersion"].as_str().expect("apiVersion").split_once('/').unwrap_or(("", "v1"));
    let gvk = GroupVersionKind::gvk(group, version, object["kind"].as_str().expect("kind"));
    Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk))
}

fn dynamic(object: &Value) -> DynamicObject {
    serde_json::from_value(object.clone()).expect("an object")
}

/// Binds `user` to edit the yuxi.dev resources of `namespace` (and read ConfigMaps, create them).
pub fn grant_edit(plane: &crate::control_plane::ControlPlane, namespace: &str, user: &str) {
    let name = format!("yuxi-edit-{user}");
    apply_json(
        plane,
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace},
            "rules": [
                {"apiGroups": ["yuxi.dev"], "resources": ["agents", "agentruns", "knowledgebases", "models"],
                 "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "update", "patch", "delete"]},
            ],
        }),
    );
    apply_json(
        plane,
        &json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }),
    );
}

#[test]
fn the_generated_crds_are_accepted_by_server_side_apply_and_established() {
    let plane = installed().plane;
    let crds = root().join("crds");
    let out =
        kubectl_ok(plane, &["apply", "--server-side", "--field-manager=yuxi-tests", "-f", &crds.display().to_string()]);
    for crd in ["agents.yuxi.dev", "agentruns.yuxi.dev", "knowledgebases.yuxi.dev", "models.yuxi.dev"] {
        assert!(out.contains(crd), "{crd} applied: {out}");
        let conditions = kubectl_ok(
            plane,
            &["get", "crd", crd, "-o", r#"jsonpath={range .status.conditions[*]}{.type}={.status} {end}"#],
        );
        for wanted in ["Established=True", "NamesAccepted=True"] {
            assert!(conditions.contains(wanted), "{crd}: {conditions}");
        }
        assert!(!conditions.contains("NonStructuralSchema=True"), "{crd}: {conditions}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_served_crds_keep_every_cel_rule_of_the_generated_ones() {
    let plane = installed().plane;
    let crds: Api<CustomResourceDefinition> = Api::all(plane.admin().await);
    for file in yaml_files("crds") {
        let generated = &documents(&file)[0];
        let name = generated["metadata"]["name"].as_str().expect("name");
        let served = serde_json::to_value(crds.get(name).await.expect("served CRD")).expect("json");
        let rules = |crd: &Value| {
            let mut found = Vec::new();
            collect_rules(&crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"], &mut found);
            found.sort();
            found
        };
        let generated_rules = rules(generated);
        assert!(!generated_rules.is_empty() || name == "none", "{name} has CEL rules");
        assert_eq!(rules(&served), generated_rules, "{name}: the server keeps every rule as written");
    }
}

fn collect_rules(schema: &Value, found: &mut Vec<String>) {
    match schema {
        Value::Object(map) => {
            if let Some(Value::Array(rules)) = map.get("x-kubernetes-validations") {
                found.extend(rules.iter().map(|r| r["rule"].as_str().unwrap_or_default().to_string()));
            }
            map.values().for_each(|v| collect_rules(v, found));
        }
        Value::Array(items) => items.iter().for_each(|v| collect_rules(v, found)),
        _ => {}
    }
}

/// The examples, applied once in [`EXAMPLES`] by a member of `yuxi:run-creators` (the AgentRun example
/// names the user it runs for).
async fn examples_applied() {
    static APPLIED: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    APPLIED
        .get_or_init(|| async {
            let plane = installed().plane;
            restricted_namespace(plane, EXAMPLES);
            grant_edit(plane, EXAMPLES, "carol");
            let carol = plane.client("carol-token").await;
            for file in yaml_files("examples") {
                for object in documents(&file) {
                    if !object["apiVersion"].as_str().is_some_and(|v| v.starts_with("yuxi.dev/") || v == "v1") {
                        continue;
                    }
                    if object.get("kind").is_none() {
                        continue;
                    }
                    let api = api_for(&carol, &object, EXAMPLES);
                    let params = PostParams { dry_run: false, field_manager: Some("yuxi-tests".into()) };
                    if let Err(err) = api.create(&params, &dynamic(&object)).await {
                        panic!("{}: {} is refused: {err}", file.display(), object["metadata"]["name"]);
                    }
                }
            }
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_manifest_is_admitted() {
    examples_applied().await;
    let plane = installed().plane;
    let agents = kubectl_ok(plane, &["get", "agents", "-n", EXAMPLES, "-o", "name"]);
    for agent in ["deep-research", "fact-verifier", "general-purpose", "note-taker", "research-explorer"] {
        assert!(agents.contains(&format!("agent.yuxi.dev/{agent}")), "{agents}");
    }
    let runs = kubectl_ok(plane, &["get", "agentruns", "-n", EXAMPLES, "-o", "jsonpath={.items[*].spec.uid}"]);
    assert_eq!(runs.trim(), "platform-team", "a run creator's AgentRun keeps the uid it names");
    let kbs = kubectl_ok(plane, &["get", "knowledgebases", "-n", EXAMPLES, "-o", "name"]);
    assert!(kbs.contains("research-notes"), "{kbs}");
}

/// The field `yuxi-operator validate` names for the first error of `file`.
fn validate_field(file: &Path) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_yuxi-operator"))
        .arg("validate")
        .arg(file)
        .arg(root().join("examples"))
        .output()
        .expect("validate");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let file_name = file.file_name().expect("name").to_string_lossy().into_owned();
    let mut lines = text.lines().skip_while(|l| !(l.starts_with("rejected") && l.contains(&file_name)));
    lines.next().unwrap_or_else(|| panic!("validate rejects {file_name}:\n{text}"));
    let error =
        lines.next().and_then(|l| l.trim().strip_prefix("error:")).unwrap_or_else(|| panic!("an error line:\n{text}"));
    error.trim().split(':').next().expect("a field").trim().to_string()
}

/// What the server answered to the refused object: the fields its causes name, and the message.
fn refusal(err: kube::Error) -> (Vec<String>, String) {
    match err {
        kube::Error::Api(status) => {
            let fields = status.details.iter().flat_map(|d| d.causes.iter()).map(|c| c.field.clone()).collect();
            (fields, status.message)
        }
        other => panic!("not an API refusal: {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_invalid_example_is_refused_naming_the_field_validate_names() {
    examples_applied().await;
    let plane = installed().plane;
    let carol = plane.client("carol-token").await;
    let params = PostParams { dry_run: false, field_manager: Some("yuxi-tests".into()) };
    let mut checked = 0;
    for file in yaml_files("examples/invalid") {
        let text = std::fs::read_to_string(&file).expect("readable");
        let expected =
            text.lines().find_map(|l| l.strip_prefix("# expect-field:")).expect("expect-field").trim().to_string();
        let enforced_by = text.lines().find_map(|l| l.strip_prefix("# enforced-by:")).expect("enforced-by").to_string();
        let by_validate = validate_field(&file);
        assert_eq!(by_validate, expected, "{}: validate names the header's field", file.display());
        let docs = documents(&file);
        let api = api_for(&carol, &docs[0], EXAMPLES);
        let outcome = match docs.as_slice() {
            [object] => api.create(&params, &dynamic(object)).await.map(|_| ()),
            [before, after] => {
                let name = before["metadata"]["name"].as_str().expect("name");
                api.create(&params, &dynamic(before))
                    .await
                    .unwrap_or_else(|e| panic!("{}: the first document: {e}", file.display()));
                let mut update = dynamic(after);
                update.metadata.resource_version = api.get(name).await.expect("created").metadata.resource_version;
                let outcome = api.replace(name, &params, &update).await.map(|_| ());
                api.delete(name, &Default::default()).await.expect("delete");
                outcome
            }
            other => panic!("{}: {} documents", file.display(), other.len()),
        };
        let err = match outcome {
            Ok(()) => panic!("{}: the API server admitted it", file.display()),
            Err(err) => err,
        };
        let (fields, message) = refusal(err);
        let by_webhook = message.contains("admission webhook");
        let named = fields.contains(&expected) || message.contains(&format!("{expected}:"));
        assert!(
            named,
            "{}: the server's refusal names {expected} as validate does; it said {message} (fields {fields:?})",
            file.display()
        );
        if enforced_by.trim() == "webhook" {
            assert!(by_webhook, "{}: refused by the webhook: {message}", file.display());
        } else {
            assert!(
                !by_webhook,
                "{}: refused by the CRD's own rules ({enforced_by}) before the webhook: {message}",
                file.display()
            );
        }
        checked += 1;
    }
    assert!(checked >= 20, "{checked} invalid examples");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explicit_nulls_are_admitted_as_absent_fields() {
    examples_applied().await;
    let carol = installed().plane.client("carol-token").await;
    let params = PostParams { dry_run: false, field_manager: Some("yuxi-tests".into()) };
    let agents = [
        json!({"backend": "SubAgentBackend", "default": null, "isSubagent": null}),
        json!({"backend": "SubAgentBackend", "context": {"subagents": null, "tools": null}}),
        json!({"backend": "ChatbotAgent", "share": {"readScope": {"accessLevel": "User", "userUids": ["u"]}, "manageScope": null}}),
        json!({"backend": "ChatbotAgent", "context": null, "share": null}),
    ];
    for spec in agents {
        let object = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
            "metadata": {"name": crate::unique("nulls")}, "spec": spec});
        let api = api_for(&carol, &object, EXAMPLES);
        api.create(&params, &dynamic(&object)).await.unwrap_or_else(|e| panic!("{spec}: {e}"));
    }
    let name = crate::unique("null-run");
    let run = |spec: Value| json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "metadata": {"name": name}, "spec": spec});
    let created = run(json!({"agent": "research-explorer", "input": "x", "uid": null, "cancel": null}));
    let api = api_for(&carol, &created, EXAMPLES);
    let stored = api.create(&params, &dynamic(&created)).await.expect("a run with nulls");
    let mut updated = dynamic(&run(
        json!({"agent": "research-explorer", "input": "x", "model": null, "parent": null, "cancel": false}),
    ));
    updated.metadata.resource_version = stored.metadata.resource_version;
    api.replace(&name, &params, &updated).await.expect("an update with nulls");
}

/// The Models of `examples/models/` are admitted, `kubectl get mdl` lists them with the printer columns,
/// and the category `yuxi` includes them. (The invalid Models of `examples/invalid/` are refused naming
/// their field by [`every_invalid_example_is_refused_naming_the_field_validate_names`].)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_models_are_admitted_and_listed_with_their_columns() {
    examples_applied().await;
    let plane = installed().plane;
    let carol = plane.client("carol-token").await;
    let params = PostParams { dry_run: false, field_manager: Some("yuxi-tests".into()) };
    for file in yaml_files("examples/models") {
        for object in documents(&file) {
            let api = api_for(&carol, &object, EXAMPLES);
            if let Err(err) = api.create(&params, &dynamic(&object)).await {
                panic!("{}: {} is refused: {err}", file.display(), object["metadata"]["name"]);
            }
        }
    }
    let table = kubectl_ok(plane, &["get", "mdl", "-n", EXAMPLES]);
    let header: Vec<&str> = table.lines().next().expect("a header").split_whitespace().collect();
    assert_eq!(header, ["NAME", "PROVIDER", "MODEL", "AVAILABLE", "AGE"], "{table}");
    let row = |name: &str| -> Vec<String> {
        let line =
            table.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_else(|| panic!("{table}"));
        line.split_whitespace().take(3).map(str::to_string).collect()
    };
    assert_eq!(row("deepseek-chat"), ["deepseek-chat", "OpenAICompatible", "deepseek-chat"]);
    assert_eq!(row("claude-on-bedrock"), ["claude-on-bedrock", "Bedrock", "anthropic.claude-3-5-sonnet-20240620-v1:0"]);
    let yuxi = kubectl_ok(plane, &["get", "yuxi", "-n", EXAMPLES, "-o", "name"]);
    assert!(yuxi.contains("model.yuxi.dev/gpt-4o-team-a"), "{yuxi}");
}
