//! Admission as the real API server runs it with the chart installed: the webhook, called by the server
//! over TLS as the chart's configurations say, stamping and checking `spec.uid` and deriving
//! `isSubagent`; the CRD's rules before it; the chart's ValidatingAdmissionPolicy keeping the facade's
//! account to run-credentials Secrets.

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::core::ApiResource;
use serde_json::{Value, json};

use crate::chart_pods::service_account_token;
use crate::install::{RELEASE, RELEASE_NAMESPACE, SERVED, installed};
use crate::resources::grant_edit;

fn agent_runs(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "AgentRun")),
    )
}

fn agents(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "Agent")),
    )
}

fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("an object")
}

fn params() -> PostParams {
    PostParams { dry_run: false, field_manager: Some("yuxi-tests".into()) }
}

fn refusal_message(err: kube::Error) -> String {
    match err {
        kube::Error::Api(status) => status.message,
        other => panic!("not an API refusal: {other}"),
    }
}

/// An AgentRun of `agent` in `name`, for `uid` when given.
fn run(name: &str, uid: Option<&str>) -> DynamicObject {
    let mut spec = json!({"agent": "general-purpose", "input": "Look around."});
    if let Some(uid) = uid {
        spec["uid"] = json!(uid);
    }
    object(json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "metadata": {"name": name}, "spec": spec}))
}

#[test]
fn the_installed_webhook_configurations_call_the_chart_service_with_its_ca_and_fail_closed() {
    let installed = installed();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let admin = installed.plane.admin().await;
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(admin.clone());
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
        let secret: Secret = Api::namespaced(admin.clone(), RELEASE_NAMESPACE)
            .get(&format!("{RELEASE}-webhook-tls"))
            .await
            .expect("tls Secret");
        let ca = secret.data.expect("data").remove("ca.crt").expect("ca.crt").0;
        let validating =
            serde_json::to_value(validating.get(&format!("{RELEASE}-validating")).await.expect("validating"))
                .expect("json");
        let mutating =
            serde_json::to_value(mutating.get(&format!("{RELEASE}-mutating")).await.expect("mutating")).expect("json");
        for (config, path) in [(validating, "/validate"), (mutating, "/mutate")] {
            let hooks = config["webhooks"].as_array().expect("webhooks");
            assert_eq!(hooks.len(), 4, "agents, agentruns, knowledgebases, models: {config}");
            for hook in hooks {
                assert_eq!(hook["failurePolicy"], "Fail", "{hook}");
                assert_eq!(hook["sideEffects"], "None", "{hook}");
                assert_eq!(hook["clientConfig"]["service"]["name"], format!("{RELEASE}-webhook"));
                assert_eq!(hook["clientConfig"]["service"]["path"], path);
                use base64::Engine;
                let bundle = base64::engine::general_purpose::STANDARD
                    .decode(hook["clientConfig"]["caBundle"].as_str().expect("caBundle"))
                    .expect("base64");
                assert_eq!(bundle, ca, "the caBundle is the CA of the webhook's certificate");
            }
        }
    });
    let log = installed.webhook.lock().expect("webhook").log();
    assert!(log.contains("serving") || log.contains("listen"), "the webhook started: {log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_run_without_a_uid_gets_its_creators_uid_stamped_by_the_webhook() {
    let plane = installed().plane;
    grant_edit(plane, SERVED[0], "alice");
    let alice = plane.client("alice-token").await;
    let name = crate::unique("stamped");
    let created = agent_runs(&alice, SERVED[0]).create(&params(), &run(&name, None)).await.expect("created");
    assert_eq!(created.data["spec"]["uid"], "alice", "{:?}", created.data);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_run_for_another_users_uid_is_refused_by_the_webhook_and_a_run_creators_is_not() {
    let plane = installed().plane;
    grant_edit(plane, SERVED[0], "alice");
    grant_edit(plane, SERVED[0], "carol");
    let alice = plane.client("alice-token").await;
    let err = agent_runs(&alice, SERVED[0])
        .create(&params(), &run(&crate::unique("forged"), Some("bob")))
        .await
        .expect_err("refused");
    let message = refusal_message(err);
    assert!(message.contains("admission webhook") && message.contains("spec.uid"), "{message}");
    let carol = plane.client("carol-token").await;
    let created = agent_runs(&carol, SERVED[0])
        .create(&params(), &run(&crate::unique("for-bob"), Some("bob")))
        .await
        .expect("a run creator names the user");
    assert_eq!(created.data["spec"]["uid"], "bob");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagent_gets_is_subagent_derived_and_a_contradiction_is_refused_naming_it() {
    let plane = installed().plane;
    let admin = plane.admin().await;
    let api = agents(&admin, SERVED[1]);
    let derived = api
        .create(&params(), &object(json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
            "metadata": {"name": crate::unique("helper")}, "spec": {"backend": "SubAgentBackend", "description": "Helps."}})))
        .await
        .expect("created");
    assert_eq!(derived.data["spec"]["isSubagent"], true, "the mutating webhook derives it: {:?}", derived.data);
    let err = api
        .create(&params(), &object(json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
            "metadata": {"name": crate::unique("poser")}, "spec": {"backend": "SubAgentBackend", "isSubagent": false, "description": "Poses."}})))
        .await
        .expect_err("refused");
    let message = refusal_message(err);
    assert!(message.contains("spec.isSubagent"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_naming_an_mcp_server_its_author_may_not_use_is_refused_naming_the_field() {
    let plane = installed().plane;
    grant_edit(plane, SERVED[0], "alice");
    grant_edit(plane, SERVED[0], "bob");
    let admin = plane.admin().await;
    let servers = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        SERVED[0],
        &ApiResource::from_gvk(&kube::core::GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "McpServer")),
    );
    let (alices, open) = (crate::unique("alices-docs"), crate::unique("open-docs"));
    for (name, share) in
        [(&alices, json!({"readScope": {"accessLevel": "User", "userUids": ["alice"]}})), (&open, Value::Null)]
    {
        let mut spec = json!({"url": "http://127.0.0.1:9/mcp"});
        if !share.is_null() {
            spec["share"] = share;
        }
        servers
            .create(&params(), &object(json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "McpServer", "metadata": {"name": name}, "spec": spec})))
            .await
            .expect("an McpServer");
    }
    let agent = |mcps: Value| {
        object(
            json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent", "metadata": {"name": crate::unique("mcp-user")},
            "spec": {"backend": "ChatbotAgent", "context": {"mcps": mcps}}}),
        )
    };
    let alice = plane.client("alice-token").await;
    agents(&alice, SERVED[0]).create(&params(), &agent(json!([alices, open]))).await.expect("alice may use both");
    let bob = plane.client("bob-token").await;
    agents(&bob, SERVED[0]).create(&params(), &agent(json!([open]))).await.expect("bob may use the open one");
    let refused = |err| refusal_message(err);
    let theirs =
        refused(agents(&bob, SERVED[0]).create(&params(), &agent(json!([open, alices]))).await.expect_err("not bob's"));
    assert!(theirs.contains("spec.context.mcps[1]"), "{theirs}");
    let missing = refused(
        agents(&bob, SERVED[0]).create(&params(), &agent(json!([open, "no-such-server"]))).await.expect_err("none"),
    );
    assert!(missing.contains("spec.context.mcps[1]"), "{missing}");
    // Another user's server answers as one that does not exist: the same words, the name aside.
    assert_eq!(theirs.replace(&alices, "X"), missing.replace("no-such-server", "X"));
}

/// A run-credentials Secret for the AgentRun `run` (its uid `uid`), as the facade makes one.
fn credentials(run: &str, uid: &str, secret_type: &str) -> Secret {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret", "type": secret_type,
        "metadata": {"name": format!("{run}-credentials"), "labels": {"yuxi.dev/run": run},
            "ownerReferences": [{"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "name": run, "uid": uid}]},
        "stringData": {"token": "t"},
    }))
    .expect("a Secret")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admission_policy_lets_the_facade_create_run_credentials_and_no_other_secret() {
    let plane = installed().plane;
    let admin = plane.admin().await;
    let token = service_account_token(&admin, RELEASE_NAMESPACE, &format!("{RELEASE}-api"), &[]).await;
    let facade = plane.client(&token).await;
    let run_name = crate::unique("credentialed");
    grant_edit(plane, SERVED[0], "carol");
    let carol = plane.client("carol-token").await;
    let owner = agent_runs(&carol, SERVED[0]).create(&params(), &run(&run_name, Some("alice"))).await.expect("run");
    let uid = owner.metadata.uid.clone().expect("uid");
    let secrets: Api<Secret> = Api::namespaced(facade.clone(), SERVED[0]);

    let err = secrets.create(&params(), &credentials(&run_name, &uid, "Opaque")).await.expect_err("refused");
    let message = refusal_message(err);
    assert!(
        message.contains(&format!("{RELEASE}-api-secrets")) && message.contains("yuxi.dev/run-credentials"),
        "{message}"
    );

    let mut unowned = credentials(&run_name, &uid, "yuxi.dev/run-credentials");
    unowned.metadata.owner_references = None;
    let message = refusal_message(secrets.create(&params(), &unowned).await.expect_err("refused"));
    assert!(message.contains("owned by its AgentRun"), "{message}");

    secrets.create(&params(), &credentials(&run_name, &uid, "yuxi.dev/run-credentials")).await.expect("admitted");
    // A resume renews the token of the run's own Secret: the facade may patch that one.
    let fresh = json!({"stringData": {"token": "renewed"}});
    let patch = kube::api::PatchParams { field_manager: Some("yuxi-tests".into()), ..Default::default() };
    secrets.patch(&format!("{run_name}-credentials"), &patch, &kube::api::Patch::Merge(&fresh)).await.expect("renewed");

    // The policy binds the facade only: an administrator's Secret of any type is admitted...
    let admins: Api<Secret> = Api::namespaced(admin, SERVED[0]);
    let other_name = crate::unique("model-key");
    let mut other = credentials(&other_name, &uid, "Opaque");
    other.metadata.name = Some(other_name.clone());
    other.metadata.owner_references = None;
    admins.create(&params(), &other).await.expect("an administrator's Secret");
    // ...and the facade, which may patch Secrets for resumes, may not change it.
    let message = refusal_message(
        secrets.patch(&other_name, &patch, &kube::api::Patch::Merge(&fresh)).await.expect_err("refused"),
    );
    assert!(message.contains(&format!("{RELEASE}-api-secrets")), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_naming_what_its_namespace_lacks_is_admitted_with_warnings_and_a_misspelt_tool_is_refused() {
    let plane = installed().plane;
    let dir = tempfile::TempDir::new().expect("dir");
    let write = |name: &str, context: &str| {
        let path = dir.path().join(format!("{name}.yaml"));
        let manifest = format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {name}}}\nspec:\n  backend: ChatbotAgent\n  context: {context}\n"
        );
        std::fs::write(&path, manifest).expect("write");
        path.display().to_string()
    };
    // GitOps applies in any order: a knowledge base or a Model that is not there yet is a warning.
    let later = write(&crate::unique("names-later"), "{tools: [ls], knowledges: [handbook], model: team-model}");
    let admitted = plane.kubectl(&["create", "--dry-run=server", "-n", SERVED[0], "-f", &later]);
    let said = String::from_utf8_lossy(&admitted.stderr).into_owned();
    assert!(admitted.status.success(), "{said}");
    assert!(said.contains("Warning: spec.context.knowledges[0]: no knowledge base \"handbook\""), "{said}");
    assert!(said.contains("Warning: spec.context.model: no Model \"team-model\""), "{said}");
    // A built-in tool is known everywhere: a misspelt one is refused, with the close match.
    let misspelt = write(&crate::unique("names-typo"), "{tools: [read_fiel]}");
    let refused = plane.kubectl(&["create", "--dry-run=server", "-n", SERVED[0], "-f", &misspelt]);
    let said = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!refused.status.success(), "refused: {said}");
    assert!(
        said.contains("spec.context.tools[0]") && said.contains("did you mean") && said.contains("read_file"),
        "{said}"
    );
}
