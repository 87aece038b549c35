//! Writes made as the user, against the real API server: facades started from the chart's Deployment
//! with `--impersonate` and the suite's OpenID provider (`--oidc-config`), their account given the
//! chart's impersonation role, and team A's people (the provider's group `team-a`) bound to the
//! chart's `<release>-user` role in namespace team-a only. The API server trusts the same provider, so
//! the person the facade writes as is the person the cluster sees.

use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};

use crate::chart_pods::{Overrides, chart_pod};
use crate::control_plane::{OIDC_AUDIENCE, OIDC_PREFIX};
use crate::controller::redis_url;
use crate::facade::call_at;
use crate::install::{RELEASE, RELEASE_NAMESPACE, SERVED, apply_json, helm, installed, kubectl_ok};
use crate::oidc_provider::PEOPLE;
use crate::processes::{Process, free_port, wait_until};

/// The release whose rendered RBAC the impersonating facades run with (its own account, so the
/// installed release's rights stay as its RBAC test expects them).
const CALLERS: &str = "yuxi-callers";

/// The facade account and RBAC of release [`CALLERS`] rendered by the chart with
/// `api.impersonation.enabled` and the two teams' groups (once serving team-a, once team-b), applied;
/// and team A's RoleBinding to the chart's `<release>-user` role in team-a.
fn prepare() {
    static PREPARED: OnceLock<()> = OnceLock::new();
    PREPARED.get_or_init(|| {
        let plane = installed().plane;
        let mut kinds = Vec::new();
        for namespace in SERVED {
            let watch = format!("watchNamespaces={{{namespace}}}");
            let rendered = helm(
                plane,
                &[
                    "template",
                    CALLERS,
                    "charts/yuxi-operator",
                    "--namespace",
                    RELEASE_NAMESPACE,
                    "--set",
                    &watch,
                    "--set",
                    "api.impersonation.enabled=true",
                    "--set",
                    &format!("api.impersonation.groups={{{OIDC_PREFIX}team-a,{OIDC_PREFIX}team-b}}"),
                    "--show-only",
                    "templates/rbac.yaml",
                    "--show-only",
                    "templates/serviceaccounts.yaml",
                ],
            );
            for document in rendered.split("\n---") {
                let Ok(object) = serde_norway::from_str::<Value>(document) else { continue };
                let name = object["metadata"]["name"].as_str().unwrap_or_default();
                if name == format!("{CALLERS}-api") || name == format!("{CALLERS}-api-impersonate") {
                    apply_json(plane, &object);
                    kinds.push(format!("{}/{name}", object["kind"].as_str().unwrap_or_default()));
                }
            }
        }
        for wanted in ["ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"] {
            assert!(kinds.iter().any(|k| k.starts_with(&format!("{wanted}/"))), "the chart renders a {wanted}: {kinds:?}");
        }
        let verbs = kubectl_ok(
            plane,
            &["get", "role", &format!("{CALLERS}-api"), "-n", SERVED[1], "-o", "jsonpath={.rules[0].verbs}"],
        );
        assert_eq!(verbs, r#"["get","list"]"#, "impersonating, the facade's own account only reads Agents");
        apply_json(
            plane,
            &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "team-a-editors", "namespace": SERVED[0]},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("{RELEASE}-user")},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": format!("{OIDC_PREFIX}team-a")}]}),
        );
        let group = format!("--as-group={OIDC_PREFIX}team-a");
        let user = format!("--as={OIDC_PREFIX}alice");
        wait_until(
            "team A may create AgentRuns in team-a",
            Duration::from_secs(60),
            || {
                plane
                    .kubectl(&["auth", "can-i", "create", "agentruns.yuxi.dev", "-n", SERVED[0], &user, &group])
                    .status
                    .success()
            },
            String::new,
        );
    });
}

/// The impersonating facade of `namespace` (team-a or team-b), started once: its base URL.
fn facade(namespace: &'static str) -> String {
    /// A started facade: its namespace, base URL and process.
    type Started = (&'static str, String, Process);
    static FACADES: OnceLock<Mutex<Vec<Started>>> = OnceLock::new();
    let facades = FACADES.get_or_init(|| Mutex::new(Vec::new()));
    let mut facades = facades.lock().expect("facades");
    if let Some((_, base, _)) = facades.iter().find(|(ns, _, _)| *ns == namespace) {
        return base.clone();
    }
    prepare();
    let (base, process) = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let plane = installed().plane;
        let config = plane.dir.join(format!("oidc-{namespace}.yaml"));
        std::fs::write(
            &config,
            format!(
                "issuer: {}\naudiences: [{OIDC_AUDIENCE}]\nusernamePrefix: '{OIDC_PREFIX}'\ngroupsClaim: groups\ngroupsPrefix: '{OIDC_PREFIX}'\nroleClaim: yuxi_role\nadminValues: [admin]\ncertificateAuthority: {}\n",
                plane.oidc.issuer,
                plane.oidc.ca_file.display()
            ),
        )
        .expect("write");
        let port = free_port("127.0.0.1");
        let pod = runtime.block_on(chart_pod(
            plane,
            RELEASE_NAMESPACE,
            &format!("{RELEASE}-api"),
            Overrides {
                args: vec![
                    ("--listen=".into(), format!("--listen=127.0.0.1:{port}")),
                    ("--namespace=".into(), format!("--namespace={namespace}")),
                ],
                env: vec![
                    ("REDIS_URL".into(), redis_url()),
                    ("YUXI_IMPERSONATE".into(), "true".into()),
                    ("YUXI_OIDC_CONFIG".into(), config.display().to_string()),
                ],
                pod_name: format!("api-as-callers-{namespace}"),
                account: Some(format!("{CALLERS}-api")),
            },
        ));
        let process = pod.start(&format!("api-as-callers-{namespace}"));
        let base = format!("http://127.0.0.1:{port}");
        let ready = format!("{base}/readyz");
        wait_until(
            "the impersonating facade is ready",
            Duration::from_secs(60),
            || std::process::Command::new("curl").args(["-sf", &ready]).output().is_ok_and(|o| o.status.success()),
            || process.log_tail(30),
        );
        (base, process)
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e));
    facades.push((namespace, base.clone(), process));
    base
}

/// `person`'s ID token from the provider (the facade's client).
async fn id_token(person: &str) -> String {
    let (_, password, ..) = PEOPLE.iter().find(|p| p.0 == person).expect("a person");
    let tokens = installed().plane.oidc.login(person, password, OIDC_AUDIENCE, "http://127.0.0.1/callback").await;
    tokens["id_token"].as_str().expect("an ID token").to_string()
}

/// The audit log's events (JSON lines) of `resource` `name` created, as the API server wrote them.
fn audited_creations(resource: &str, name: &str) -> Vec<Value> {
    let log = std::fs::read_to_string(installed().plane.dir.join("audit.log")).unwrap_or_default();
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|e| e["verb"] == "create" && e["objectRef"]["resource"] == resource && e["objectRef"]["name"] == name)
        .filter(|e| e["stage"] == "ResponseComplete")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_creates_agents_where_their_rbac_allows_and_is_refused_elsewhere_naming_the_namespace() {
    let alice = id_token("alice").await;
    let body = json!({"name": "Alice's notes", "backend_id": "ChatbotAgent", "description": "Takes notes."});
    let (status, answer) =
        call_at(&facade(SERVED[0]), reqwest::Method::POST, "/api/agent", &alice, Some(body.clone())).await;
    assert_eq!(status, 201, "{answer}");
    let slug = answer["agent"]["slug"].as_str().expect("slug").to_string();
    let audited = audited_creations("agents", &slug);
    let account = format!("system:serviceaccount:{RELEASE_NAMESPACE}:{CALLERS}-api");
    assert!(
        audited.iter().any(|e| e["user"]["username"] == account.as_str()
            && e["impersonatedUser"]["username"] == format!("{OIDC_PREFIX}alice").as_str()
            && e["responseStatus"]["code"] == 201),
        "the audit log names alice, written by the facade's account: {audited:?}"
    );

    let (status, answer) = call_at(&facade(SERVED[1]), reqwest::Method::POST, "/api/agent", &alice, Some(body)).await;
    assert_eq!(status, 403, "{answer}");
    let message = answer.to_string();
    assert!(message.contains(SERVED[1]) && message.contains(&format!("{OIDC_PREFIX}alice")), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agentrun_is_created_as_the_person_who_started_the_run() {
    let carol = id_token("carol").await;
    let base = facade(SERVED[0]);
    let (status, answer) = call_at(
        &base,
        reqwest::Method::POST,
        "/api/agent",
        &carol,
        Some(json!({"name": "Carol's helper", "backend_id": "ChatbotAgent", "description": "Helps."})),
    )
    .await;
    assert_eq!(status, 201, "{answer}");
    let slug = answer["agent"]["slug"].as_str().expect("slug").to_string();
    let (status, answer) = call_at(
        &base,
        reqwest::Method::POST,
        "/api/agent/runs",
        &carol,
        Some(json!({"query": "hello", "agent_slug": slug})),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    let run_id = answer["run_id"].as_str().expect("a run id").to_string();
    let plane = installed().plane;
    let username = format!("{OIDC_PREFIX}carol");
    wait_until(
        "the API server audits the AgentRun's creation as carol",
        Duration::from_secs(30),
        || {
            audited_creations("agentruns", &run_id)
                .iter()
                .any(|e| e["impersonatedUser"]["username"] == username.as_str() && e["responseStatus"]["code"] == 201)
        },
        || format!("{:?}", audited_creations("agentruns", &run_id)),
    );
    let uid = kubectl_ok(plane, &["get", "agentrun", &run_id, "-n", SERVED[0], "-o", "jsonpath={.spec.uid}"]);
    assert_eq!(uid, yuxi_operator::access::uid_of(&username), "the webhook checked the run is carol's own");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_and_the_facade_name_the_same_person() {
    let bob = id_token("bob").await;
    let plane = installed().plane;
    let kubeconfig = plane.kubeconfig("bob-oidc", &bob, Some(SERVED[1]));
    let output = std::process::Command::new(crate::control_plane::kube_bin().join("kubectl"))
        .args(["auth", "whoami", "-o", "json"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("kubectl");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let review: Value = serde_json::from_slice(&output.stdout).expect("json");
    let user = &review["status"]["userInfo"];
    assert_eq!(user["username"], format!("{OIDC_PREFIX}bob").as_str(), "{review}");
    let groups: Vec<&str> = user["groups"].as_array().expect("groups").iter().filter_map(Value::as_str).collect();
    assert!(groups.contains(&format!("{OIDC_PREFIX}team-b").as_str()), "{groups:?}");
    let (status, me) = call_at(&facade(SERVED[1]), reqwest::Method::GET, "/api/auth/me", &bob, None).await;
    assert_eq!(status, 200, "{me}");
    assert_eq!(me["uid"].as_str(), Some(yuxi_operator::access::uid_of(&format!("{OIDC_PREFIX}bob")).as_str()));
    assert_eq!(me["role"].as_str(), Some("admin"), "{me}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_is_never_written_as() {
    let plane = installed().plane;
    let admin = plane.admin().await;
    let accounts: kube::Api<k8s_openapi::api::core::v1::ServiceAccount> =
        kube::Api::namespaced(admin.clone(), SERVED[0]);
    let account: k8s_openapi::api::core::v1::ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "robot"}})).expect("account");
    match accounts.create(&kube::api::PostParams::default(), &account).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => panic!("{err}"),
    }
    let token = crate::chart_pods::service_account_token(&admin, SERVED[0], "robot", &["yuxi-operator"]).await;
    let (status, answer) = call_at(
        &facade(SERVED[0]),
        reqwest::Method::POST,
        "/api/agent",
        &token,
        Some(json!({"name": "Robot", "backend_id": "ChatbotAgent", "description": "Beeps."})),
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert!(answer.to_string().contains("identity of Kubernetes itself"), "{answer}");
}

#[test]
fn the_chart_refuses_impersonation_without_the_groups_it_may_assert() {
    let plane = installed().plane;
    let output = std::process::Command::new(crate::control_plane::kube_bin().join("helm"))
        .args(["template", CALLERS, "charts/yuxi-operator", "--set", "api.impersonation.enabled=true"])
        .env("HELM_CACHE_HOME", plane.dir.join("helm/cache"))
        .env("HELM_CONFIG_HOME", plane.dir.join("helm/config"))
        .env("HELM_DATA_HOME", plane.dir.join("helm/data"))
        .current_dir(crate::install::root())
        .output()
        .expect("helm");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success() && said.contains("api.impersonation.groups"), "{said}");
}
