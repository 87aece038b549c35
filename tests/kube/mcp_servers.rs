//! McpServers against the real API server, with the controller the chart deploys and an MCP server made
//! with the official MCP Python SDK (`tests/mcp/dynamic_server.py`): discovery writes the tools with
//! their hints, `kubectl get mcpservers` shows TOOLS and READY, a tool added at the server appears in
//! the status without a restart and a removed one goes; the header comes from the McpServer's Secret;
//! a server that is down, or refuses the credential, is `Ready False` with the reason; a server of
//! another namespace; a server the operator runs (its Deployment, Service and their deletion).

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use crate::controller::{controller, create_run, eventually, run_creator};
use crate::install::{SERVED, installed, kubectl_ok, root};
use crate::processes::{Process, free_port};

const NS: &str = SERVED[0];

fn servers(client: &kube::Client) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "McpServer")),
    )
}

/// The MCP SDK's python (`YUXI_MCP_PYTHON`, else what `scripts/mcp-venv` makes).
fn python() -> std::path::PathBuf {
    if let Some(python) = std::env::var_os("YUXI_MCP_PYTHON") {
        return python.into();
    }
    let output = std::process::Command::new(root().join("scripts/mcp-venv")).output().expect("mcp-venv runs");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8_lossy(&output.stdout).trim().into()
}

/// The dynamic MCP server on a port of its own, asking for `token`.
async fn dynamic_server(token: &str, dir: &std::path::Path) -> (Process, u16) {
    let port = free_port("127.0.0.1");
    let mut command = std::process::Command::new(python());
    command.arg(root().join("tests/mcp/dynamic_server.py")).arg(port.to_string()).arg(token);
    let process = Process::start(&crate::unique("dynamic-mcp"), command, dir);
    let client = reqwest12::Client::new();
    eventually("the MCP server up", Duration::from_secs(30), || {
        let client = client.clone();
        async move { client.post(format!("http://127.0.0.1:{port}/control/remove")).send().await.ok().map(|_| ()) }
    })
    .await;
    (process, port)
}

/// Creates the McpServer `name` at `url`, its token in the Secret `secret`, listed every `refresh`
/// seconds.
async fn create_server(admin: &kube::Client, name: &str, url: &str, secret: &str, refresh: u32) {
    let server = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "McpServer", "metadata": {"name": name},
        "spec": {"url": url, "refreshSeconds": refresh,
                 "headers": [{"name": "Authorization", "secretKeyRef": {"name": secret, "key": "token"}, "prefix": "Bearer "}]}});
    servers(admin)
        .create(&PostParams::default(), &serde_json::from_value(server).expect("an McpServer"))
        .await
        .expect("created");
}

/// The MCP server configuration a run's inputs Secret gives its runner.
fn mcp_servers_of(inputs: &Secret) -> String {
    let listed = inputs.data.as_ref().and_then(|d| d.get("mcp-servers.yaml"));
    listed.map(|b| String::from_utf8_lossy(&b.0).into_owned()).expect("the run's MCP servers")
}

/// The server's status once `done` holds of it.
async fn status_when(admin: &kube::Client, name: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    eventually(what, Duration::from_secs(60), || async {
        let server = servers(admin).get(name).await.ok()?;
        let status = server.data["status"].clone();
        done(&status).then_some(status)
    })
    .await
}

fn ready(status: &Value) -> (String, String) {
    let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
    let found = conditions.iter().find(|c| c["type"] == "Ready").cloned().unwrap_or_default();
    (found["status"].as_str().unwrap_or_default().into(), found["reason"].as_str().unwrap_or_default().into())
}

/// The TOOLS and READY columns of `kubectl get mcpservers` for `name`.
fn columns(name: &str) -> (String, String) {
    let table = kubectl_ok(installed().plane, &["get", "mcpservers", "-n", NS]);
    let header: Vec<&str> = table.lines().next().unwrap_or_default().split_whitespace().collect();
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("{table}"))
        .split_whitespace()
        .collect();
    let at = |column: &str| header.iter().position(|h| *h == column).unwrap_or_else(|| panic!("{table}"));
    (row[at("TOOLS")].to_string(), row[at("READY")].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_shows_the_tools_discovered_and_a_tool_added_at_the_server_appears_as_it_announces_it() {
    controller();
    let admin = installed().plane.admin().await;
    let dir = tempfile::TempDir::new().expect("dir");
    let (_server, port) = dynamic_server("mcp-secret", dir.path()).await;
    let secret = crate::unique("mcp-token");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let token = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret}, "stringData": {"token": "mcp-secret"}});
    secrets.create(&PostParams::default(), &serde_json::from_value(token).expect("a Secret")).await.expect("the token");
    let name = crate::unique("docs");
    // Listed once a day: a change shows within the test's minute only as the server announces it.
    create_server(&admin, &name, &format!("http://127.0.0.1:{port}/mcp"), &secret, 86_400).await;

    let status = status_when(&admin, &name, "one tool listed", |s| s["toolCount"] == 1).await;
    assert_eq!(ready(&status), ("True".into(), "Listed".into()), "{status}");
    assert_eq!(status["tools"][0]["name"], "search");
    assert_eq!(status["tools"][0]["readOnly"], true);
    assert!(status["tools"][0]["inputSchema"].as_str().expect("a schema").contains("query"), "{status}");
    assert_eq!(status["serverName"], "dynamic-docs");
    assert!(!status.to_string().contains("mcp-secret"), "the token is not in the status: {status}");
    assert_eq!(columns(&name), ("1".into(), "True".into()));

    let client = reqwest12::Client::new();
    client.post(format!("http://127.0.0.1:{port}/control/add")).send().await.expect("added");
    let status = status_when(&admin, &name, "the added tool, announced", |s| s["toolCount"] == 2).await;
    let added = status["tools"].as_array().expect("tools").iter().find(|t| t["name"] == "delete_note").cloned();
    assert_eq!(added.expect("delete_note")["destructive"], true, "{status}");
    assert_eq!(columns(&name), ("2".into(), "True".into()));
    client.post(format!("http://127.0.0.1:{port}/control/remove")).send().await.expect("removed");
    status_when(&admin, &name, "the removed tool gone, announced", |s| s["toolCount"] == 1).await;

    // An agent naming it: a run's inputs list the server, its token a variable of the runner alone.
    let agent = crate::unique("uses-docs");
    let agents = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "Agent")),
    );
    let manifest = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent", "metadata": {"name": agent},
        "spec": {"backend": "ChatbotAgent", "context": {"mcps": [name]}, "share": {"readScope": {"accessLevel": "Global"}}}});
    agents
        .create(&PostParams::default(), &serde_json::from_value(manifest).expect("an Agent"))
        .await
        .expect("the Agent");
    let run = crate::unique("with-docs");
    create_run(&run_creator().await, &run, json!({}), json!({"agent": agent})).await;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.clone(), NS);
    let pod =
        eventually("the run's pod", Duration::from_secs(60), || async { pods.get_opt(&run).await.ok().flatten() })
            .await;
    let spec = pod.spec.expect("a pod spec");
    let from_secret = |c: &k8s_openapi::api::core::v1::Container| {
        c.env
            .iter()
            .flatten()
            .find(|v| v.name == "YUXI_MCP_HEADER_0")
            .and_then(|v| v.value_from.as_ref()?.secret_key_ref.clone())
            .map(|s| s.name)
    };
    let runner = spec.containers.iter().find(|c| c.name == "runner").expect("runner");
    // The sandbox is a sidecar: an init container that keeps running.
    let sandbox = spec.init_containers.iter().flatten().find(|c| c.name == "sandbox").expect("sandbox");
    assert_eq!(from_secret(runner), Some(secret.clone()), "the McpServer's Secret, for the runner");
    assert_eq!(from_secret(sandbox), None, "never the sandbox's");
    let inputs = secrets.get(&format!("{run}-inputs")).await.expect("the inputs");
    let listed = mcp_servers_of(&inputs);
    assert!(listed.contains(&name) && listed.contains(&format!("127.0.0.1:{port}/mcp")), "{listed}");
    assert!(!listed.contains("mcp-secret"), "the token is not in the inputs: {listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_down_or_refuses_the_credential_is_not_ready_with_the_reason() {
    controller();
    let admin = installed().plane.admin().await;
    let dir = tempfile::TempDir::new().expect("dir");
    let (_server, port) = dynamic_server("the-right-one", dir.path()).await;
    let secret = crate::unique("wrong-token");
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let token = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret}, "stringData": {"token": "a-wrong-one"}});
    secrets.create(&PostParams::default(), &serde_json::from_value(token).expect("a Secret")).await.expect("the token");
    let refused = crate::unique("refusing");
    create_server(&admin, &refused, &format!("http://127.0.0.1:{port}/mcp"), &secret, 5).await;
    let down = crate::unique("down");
    create_server(&admin, &down, &format!("http://127.0.0.1:{}/mcp", free_port("127.0.0.1")), &secret, 5).await;
    for name in [&refused, &down] {
        let status = status_when(&admin, name, "Ready False", |s| ready(s).0 == "False").await;
        assert_eq!(ready(&status).1, "Unreachable", "{status}");
        assert!(status["lastError"].is_string(), "{status}");
        assert!(!status.to_string().contains("a-wrong-one"), "the token is not in the status: {status}");
        assert_eq!(columns(name).1, "False");
    }
    let missing = crate::unique("no-secret");
    create_server(&admin, &missing, &format!("http://127.0.0.1:{port}/mcp"), "no-such-secret", 5).await;
    let status = status_when(&admin, &missing, "not accepted", |s| {
        s["conditions"].as_array().is_some_and(|c| c.iter().any(|c| c["type"] == "Accepted" && c["status"] == "False"))
    })
    .await;
    assert!(status.to_string().contains("spec.headers[0].secretKeyRef"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_of_another_namespace_serves_the_namespaces_it_allows_and_lends_them_no_secret() {
    controller();
    let admin = installed().plane.admin().await;
    let home = SERVED[1];
    let theirs = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        home,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "McpServer")),
    );
    let (shared, private, lending) = (crate::unique("shared"), crate::unique("private"), crate::unique("lending"));
    let url = format!("http://127.0.0.1:{}/mcp", free_port("127.0.0.1"));
    for (name, spec) in [
        (&shared, json!({"url": url, "allowedNamespaces": [NS], "headers": [{"name": "X-Team", "value": "platform"}]})),
        (&private, json!({"url": url})),
        (
            &lending,
            json!({"url": url, "allowedNamespaces": ["*"], "headers": [{"name": "Authorization", "secretKeyRef": {"name": "platform-token", "key": "token"}}]}),
        ),
    ] {
        let server =
            json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "McpServer", "metadata": {"name": name}, "spec": spec});
        theirs
            .create(&PostParams::default(), &serde_json::from_value(server).expect("an McpServer"))
            .await
            .expect("created");
    }
    // A server that would lend its Secret to other namespaces is not accepted.
    let status = eventually("the lending server judged", Duration::from_secs(60), || async {
        let server = theirs.get(&lending).await.ok()?;
        let status = server.data["status"].clone();
        let conditions = status["conditions"].as_array().cloned().unwrap_or_default();
        conditions.iter().any(|c| c["type"] == "Accepted" && c["status"] == "False").then_some(status)
    })
    .await;
    assert!(status.to_string().contains("spec.headers[0].secretKeyRef"), "{status}");

    let agents = Api::<DynamicObject>::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("yuxi.dev", "v1alpha1", "Agent")),
    );
    let agent = |mcps: Value| -> DynamicObject {
        serde_json::from_value(json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent", "metadata": {"name": crate::unique("cross")},
            "spec": {"backend": "ChatbotAgent", "context": {"mcps": mcps}, "share": {"readScope": {"accessLevel": "Global"}}}}))
        .expect("an Agent")
    };
    let uses = agent(json!([format!("{home}/{shared}")]));
    let slug = uses.metadata.name.clone().expect("a name");
    agents.create(&PostParams::default(), &uses).await.expect("a server that allows the namespace is admitted");
    for (mcps, what) in
        [(json!([format!("{home}/{private}")]), "not allowed"), (json!([shared]), "not of this namespace")]
    {
        let refused = agents.create(&PostParams::default(), &agent(mcps)).await.expect_err(what).to_string();
        assert!(refused.contains("spec.context.mcps[0]"), "{what}: {refused}");
    }

    // A run gets it under the name its agent uses.
    let run = crate::unique("cross-run");
    create_run(&run_creator().await, &run, json!({}), json!({"agent": slug})).await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let inputs = eventually("the run's inputs", Duration::from_secs(60), || async {
        secrets.get_opt(&format!("{run}-inputs")).await.ok().flatten()
    })
    .await;
    let listed = mcp_servers_of(&inputs);
    assert!(
        listed.contains(&format!("{home}/{shared}")) && listed.contains(&url) && listed.contains("platform"),
        "{listed}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_the_operator_runs_is_a_restricted_deployment_and_a_service_gone_with_it() {
    controller();
    let admin = installed().plane.admin().await;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> = Api::namespaced(admin.clone(), NS);
    let services: Api<k8s_openapi::api::core::v1::Service> = Api::namespaced(admin.clone(), NS);
    let name = crate::unique("run-by-us");
    let server = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "McpServer", "metadata": {"name": name},
        "spec": {"deploy": {"image": "registry.example/docs-mcp:1", "port": 9000,
                            "env": [{"name": "MODE", "value": "read"}]}}});
    servers(&admin)
        .create(&PostParams::default(), &serde_json::from_value(server).expect("an McpServer"))
        .await
        .expect("created");
    let deployment = eventually("its Deployment", Duration::from_secs(60), || async {
        deployments.get_opt(&name).await.ok().flatten()
    })
    .await;
    let service =
        eventually("its Service", Duration::from_secs(60), || async { services.get_opt(&name).await.ok().flatten() })
            .await;
    let owner = &deployment.metadata.owner_references.clone().expect("owned")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("McpServer", name.as_str()));
    let pod = deployment.spec.clone().and_then(|s| s.template.spec).expect("a pod template");
    assert_eq!(pod.automount_service_account_token, Some(false));
    assert_eq!(pod.containers[0].security_context.as_ref().and_then(|s| s.read_only_root_filesystem), Some(true));
    assert_eq!(service.spec.and_then(|s| s.ports).expect("ports")[0].port, 9000);
    // Its pod passes the namespace's restricted Pod Security admission.
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(admin.clone(), NS);
    let selector = kube::api::ListParams::default().labels(&format!("yuxi.dev/mcp-server={name}"));
    eventually("its pod admitted", Duration::from_secs(60), || async {
        pods.list(&selector).await.ok().filter(|l| !l.items.is_empty()).map(|_| ())
    })
    .await;
    // Discovery reaches it at its Service (nothing answers there: the image is not pulled here).
    let status = status_when(&admin, &name, "its endpoint", |s| s["url"].is_string()).await;
    assert_eq!(status["url"], format!("http://{name}.{NS}.svc:9000/mcp"));
    assert_eq!(columns(&name).0, "0");

    // A name another Deployment has: left alone, the server refused.
    let taken = crate::unique("taken");
    let theirs = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": taken},
        "spec": {"selector": {"matchLabels": {"app": taken}}, "template": {"metadata": {"labels": {"app": taken}},
                 "spec": {"containers": [{"name": "c", "image": "registry.example/other:1"}]}}}});
    deployments
        .create(&PostParams::default(), &serde_json::from_value(theirs).expect("a Deployment"))
        .await
        .expect("theirs");
    let server = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "McpServer", "metadata": {"name": taken},
        "spec": {"deploy": {"image": "registry.example/docs-mcp:1"}}});
    servers(&admin)
        .create(&PostParams::default(), &serde_json::from_value(server).expect("an McpServer"))
        .await
        .expect("created");
    let status = status_when(&admin, &taken, "refused", |s| {
        s["conditions"]
            .as_array()
            .is_some_and(|c| c.iter().any(|c| c["type"] == "Accepted" && c["reason"] == "NameTaken"))
    })
    .await;
    assert!(status.to_string().contains("spec.deploy"), "{status}");
    let kept = deployments.get(&taken).await.expect("theirs is kept");
    assert_eq!(
        kept.spec.and_then(|s| s.template.spec).expect("pod").containers[0].image.as_deref(),
        Some("registry.example/other:1")
    );

    // Gone with the McpServer: the garbage collector follows the owner reference.
    servers(&admin).delete(&name, &Default::default()).await.expect("deleted");
    eventually("its Deployment and Service gone", Duration::from_secs(60), || async {
        let gone = deployments.get_opt(&name).await.ok()?.is_none() && services.get_opt(&name).await.ok()?.is_none();
        gone.then_some(())
    })
    .await;
}
