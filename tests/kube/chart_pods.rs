//! The chart's roles run as the chart runs them, without a kubelet: the container of an installed
//! Deployment started as a local process of the binary under test, with the arguments and environment
//! its pod template gives, its Secret and ConfigMap volumes written into a folder (the arguments' paths
//! moved there), and the Kubernetes identity of its service account: a token from the TokenRequest API
//! in a kubeconfig, as a kubelet would mount one.
//!
//! Only what the test machine has no network for is changed, each change named here: addresses to
//! listen on (the node address, a free port), and the Redis URL (the test's Redis rather than the
//! chart's in-cluster Service).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Container, PodSpec, Secret, ServiceAccount};
use kube::Api;
use kube::api::PostParams;

use super::control_plane::ControlPlane;
use super::processes::Process;

/// A chart Deployment's container, ready to start as a process.
pub struct ChartPod {
    /// The process's command: the binary under test, the container's arguments and environment.
    pub command: Command,
    /// The folder holding the pod's volumes and kubeconfig.
    pub dir: PathBuf,
}

/// Changes to the container for the test machine: an argument prefix (such as `--listen=`) and its new
/// value, and environment variables to set.
#[derive(Default)]
pub struct Overrides {
    /// `(prefix, replacement)`: an argument starting with `prefix` becomes `replacement`.
    pub args: Vec<(String, String)>,
    /// Environment variables set after the container's own.
    pub env: Vec<(String, String)>,
    /// The pod's name (for `fieldRef: metadata.name`).
    pub pod_name: String,
    /// Another service account than the Deployment's to run as.
    pub account: Option<String>,
}

/// A token for `namespace`/`account`, from the TokenRequest API, valid for an hour, for `audiences`
/// (empty: the API server's own).
pub async fn service_account_token(
    client: &kube::Client,
    namespace: &str,
    account: &str,
    audiences: &[&str],
) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: audiences.iter().map(|a| a.to_string()).collect(),
            expiration_seconds: Some(3600),
            bound_object_ref: None,
        },
        ..TokenRequest::default()
    };
    let issued: TokenRequest = accounts
        .create_subresource("token", account, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token for {namespace}/{account}: {e}"));
    issued.status.expect("token status").token
}

/// Prepares the first container of Deployment `namespace`/`deployment` as [`ChartPod`].
pub async fn chart_pod(plane: &ControlPlane, namespace: &str, deployment: &str, overrides: Overrides) -> ChartPod {
    let admin = plane.admin().await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), namespace);
    let found =
        deployments.get(deployment).await.unwrap_or_else(|e| panic!("Deployment {namespace}/{deployment}: {e}"));
    let pod: PodSpec = found.spec.and_then(|s| s.template.spec).expect("a pod template");
    let container: Container = pod.containers.first().cloned().expect("a container");
    let account =
        overrides.account.clone().or_else(|| pod.service_account_name.clone()).unwrap_or_else(|| "default".into());
    let dir = plane.dir.join(format!("pod-{deployment}-{}", overrides.pod_name));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("pod folder");

    // Volumes: each mount's path in the container, and the folder standing for it here.
    let mut moved: Vec<(String, PathBuf)> = Vec::new();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), namespace);
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), namespace);
    for mount in container.volume_mounts.iter().flatten() {
        let volume = pod.volumes.iter().flatten().find(|v| v.name == mount.name).expect("a mounted volume");
        let local = dir.join("volumes").join(&mount.name);
        std::fs::create_dir_all(&local).expect("volume folder");
        let files: BTreeMap<String, Vec<u8>> = if let Some(source) = &volume.secret {
            let name = source.secret_name.clone().expect("secretName");
            let secret = secrets.get(&name).await.unwrap_or_else(|e| panic!("Secret {namespace}/{name}: {e}"));
            let data: BTreeMap<String, Vec<u8>> =
                secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
            project(data, source.items.as_deref())
        } else if let Some(source) = &volume.config_map {
            let name = source.name.clone();
            let map = config_maps.get(&name).await.unwrap_or_else(|e| panic!("ConfigMap {namespace}/{name}: {e}"));
            let data = map.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.into_bytes())).collect();
            project(data, source.items.as_deref())
        } else {
            // emptyDir and claims: an empty folder of the pod's.
            BTreeMap::new()
        };
        for (file, bytes) in files {
            std::fs::write(local.join(&file), bytes).expect("volume file");
        }
        moved.push((mount.mount_path.trim_end_matches('/').to_string(), local));
    }
    // Longest mount paths first, so /a/b is moved before /a.
    moved.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    let relocate = |value: &str| -> String {
        for (path, local) in &moved {
            if let Some(at) = value.find(path.as_str()) {
                let rest = &value[at + path.len()..];
                if rest.is_empty() || rest.starts_with('/') {
                    return format!("{}{}{rest}", &value[..at], local.display());
                }
            }
        }
        value.to_string()
    };

    let mut args: Vec<String> = container.args.clone().unwrap_or_default().iter().map(|a| relocate(a)).collect();
    for (prefix, replacement) in &overrides.args {
        let mut replaced = false;
        for arg in args.iter_mut().filter(|a| a.starts_with(prefix.as_str())) {
            *arg = replacement.clone();
            replaced = true;
        }
        assert!(replaced, "Deployment {deployment} has no argument starting with {prefix}: {args:?}");
    }

    let token = service_account_token(&admin, namespace, &account, &[]).await;
    let kubeconfig = plane.kubeconfig(&format!("{deployment}-{}", overrides.pod_name), &token, Some(namespace));
    let mut command = Command::new(env!("CARGO_BIN_EXE_yuxi-operator"));
    command
        .args(&args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("KUBECONFIG", &kubeconfig);
    for var in container.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(value), _) => relocate(value),
            (None, Some(from)) => {
                if let Some(field) = &from.field_ref {
                    match field.field_path.as_str() {
                        "metadata.name" => overrides.pod_name.clone(),
                        "metadata.namespace" => namespace.to_string(),
                        other => panic!("Deployment {deployment}: fieldRef {other} is not known to the test"),
                    }
                } else if let Some(key) = &from.secret_key_ref {
                    let secret = secrets.get(&key.name).await.unwrap_or_else(|e| panic!("Secret {}: {e}", key.name));
                    let bytes = secret.data.unwrap_or_default().remove(&key.key).map(|b| b.0).unwrap_or_default();
                    String::from_utf8(bytes).expect("a text Secret value")
                } else {
                    panic!("Deployment {deployment}: env {} has a source the test does not know", var.name)
                }
            }
            (None, None) => String::new(),
        };
        command.env(&var.name, value);
    }
    for (name, value) in &overrides.env {
        command.env(name, value);
    }
    ChartPod { command, dir }
}

/// The files a Secret or ConfigMap volume holds: every key, or only `items` (key to path).
fn project(
    data: BTreeMap<String, Vec<u8>>,
    items: Option<&[k8s_openapi::api::core::v1::KeyToPath]>,
) -> BTreeMap<String, Vec<u8>> {
    match items {
        None => data,
        Some(items) => items
            .iter()
            .filter_map(|item| data.get(&item.key).map(|bytes| (item.path.clone(), bytes.clone())))
            .collect(),
    }
}

impl ChartPod {
    /// Starts it, logging into the control plane's folder as `name`.
    pub fn start(self, name: &str) -> Process {
        Process::start(name, self.command, &self.dir)
    }
}
