//! The chart installed into the shared control plane as a platform team installs it: the served
//! namespaces labelled for restricted Pod Security, then `helm install` (Helm applies server-side), then
//! the webhook started from the installed Deployment with the chart's own certificate and reached by the
//! API server through the chart's Service.
//!
//! Nothing schedules the chart's pods (no scheduler or kubelet here): the webhook runs as a process on the
//! node address, and an EndpointSlice of the chart's webhook Service names it, as the EndpointSlice
//! controller would name a ready pod. The API server calls it as the rendered webhook configurations say
//! (service, path, `caBundle`, server name `<release>-webhook.<namespace>.svc`), unchanged.

use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde_json::json;

use super::chart_pods::{Overrides, chart_pod};
use super::control_plane::{ControlPlane, kube_bin, node_ip};
use super::processes::{Process, free_port, wait_until};

/// The release's name and namespace.
pub const RELEASE: &str = "yuxi";
pub const RELEASE_NAMESPACE: &str = "yuxi-system";
/// The namespaces the release serves (`watchNamespaces`).
pub const SERVED: [&str; 2] = ["team-a", "team-b"];

/// The installed chart on the shared control plane.
pub struct Installed {
    pub plane: &'static ControlPlane,
    /// The webhook, started from the chart's Deployment.
    pub webhook: Mutex<Process>,
}

/// The repository root.
pub fn root() -> std::path::PathBuf {
    std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `helm` as admin against `plane` with `args`; its output (panics naming the call when it fails).
pub fn helm(plane: &ControlPlane, args: &[&str]) -> String {
    let kubeconfig = plane.dir.join("admin.kubeconfig");
    let output = Command::new(kube_bin().join("helm"))
        .args(args)
        .env("KUBECONFIG", &kubeconfig)
        .env("HELM_CACHE_HOME", plane.dir.join("helm/cache"))
        .env("HELM_CONFIG_HOME", plane.dir.join("helm/config"))
        .env("HELM_DATA_HOME", plane.dir.join("helm/data"))
        .current_dir(root())
        .output()
        .expect("helm");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "helm {args:?} failed:\n{text}");
    text
}

/// Runs `kubectl` as admin and panics with its output when it fails; its stdout.
pub fn kubectl_ok(plane: &ControlPlane, args: &[&str]) -> String {
    let output = plane.kubectl(args);
    assert!(
        output.status.success(),
        "kubectl {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The chart, installed once for the tests that share it.
pub fn installed() -> &'static Installed {
    static INSTALLED: OnceLock<Installed> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        // Started on a thread of its own: the install uses an async runtime, and a test's runtime may
        // be the caller.
        std::thread::spawn(install).join().unwrap_or_else(|e| std::panic::resume_unwind(e))
    })
}

/// A served namespace as a platform team prepares one: Pod Security `restricted` enforced.
pub fn restricted_namespace(plane: &ControlPlane, name: &str) {
    let manifest = json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": name, "labels": {
            "pod-security.kubernetes.io/enforce": "restricted",
            "pod-security.kubernetes.io/enforce-version": "latest",
            "pod-security.kubernetes.io/warn": "restricted",
        }},
    });
    apply_json(plane, &manifest);
}

/// `kubectl apply --server-side` of one object, as admin.
pub fn apply_json(plane: &ControlPlane, object: &serde_json::Value) -> String {
    let file = plane.dir.join(format!("apply-{}.json", super::unique("object")));
    std::fs::write(&file, object.to_string()).expect("write object");
    kubectl_ok(plane, &["apply", "--server-side", "--field-manager=yuxi-tests", "-f", &file.display().to_string()])
}

fn install() -> Installed {
    let plane = ControlPlane::shared();
    restricted_namespace(plane, RELEASE_NAMESPACE);
    for ns in SERVED {
        restricted_namespace(plane, ns);
    }
    let watch = format!("watchNamespaces={{{}}}", SERVED.join(","));
    helm(
        plane,
        &[
            "install",
            RELEASE,
            "charts/yuxi-operator",
            "--namespace",
            RELEASE_NAMESPACE,
            "--server-side=true",
            "--set",
            &watch,
            "--timeout",
            "2m",
        ],
    );
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let webhook = runtime.block_on(start_webhook(plane));
    Installed { plane, webhook: Mutex::new(webhook) }
}

/// Starts the webhook from the chart's Deployment on the node address with the chart's certificate, and
/// publishes it as the endpoint of the chart's webhook Service; returns once the API server reaches it.
async fn start_webhook(plane: &'static ControlPlane) -> Process {
    let node = node_ip();
    let port = free_port(&node);
    let pod = chart_pod(
        plane,
        RELEASE_NAMESPACE,
        &format!("{RELEASE}-webhook"),
        Overrides {
            args: vec![("--listen=".into(), format!("--listen={node}:{port}"))],
            env: vec![("RUST_LOG".into(), "info".into())],
            pod_name: "webhook-0".into(),
            account: None,
        },
    )
    .await;
    let process = pod.start("webhook");
    let endpoints = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {
            "name": format!("{RELEASE}-webhook-test"), "namespace": RELEASE_NAMESPACE,
            "labels": {
                "kubernetes.io/service-name": format!("{RELEASE}-webhook"),
                "endpointslice.kubernetes.io/managed-by": "yuxi-operator-tests",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [node], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
    });
    apply_json(plane, &endpoints);
    // Reached when a dry-run create of an Agent passes both webhooks.
    let probe = json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": "webhook-probe", "namespace": SERVED[0]}, "spec": {"backend": "ChatbotAgent"}});
    let file = plane.dir.join("webhook-probe.json");
    std::fs::write(&file, probe.to_string()).expect("write probe");
    let file = file.display().to_string();
    wait_until(
        "the API server calls the chart's webhook",
        Duration::from_secs(60),
        || plane.kubectl(&["create", "--dry-run=server", "-f", &file]).status.success(),
        || {
            let output = plane.kubectl(&["create", "--dry-run=server", "-f", &file]);
            format!("{}\n{}", String::from_utf8_lossy(&output.stderr), process.log_tail(20))
        },
    );
    process
}
