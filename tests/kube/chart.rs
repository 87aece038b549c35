//! The chart as `helm install` leaves it on a real API server: the release deployed, every rendered
//! object there and applied server-side by Helm's field manager, and every Deployment's pods admitted in
//! namespaces that enforce the restricted Pod Security Standard (created by the ReplicaSet controller;
//! nothing schedules them here).

use std::time::Duration;

use serde_json::Value;

use crate::install::{RELEASE, RELEASE_NAMESPACE, helm, installed, kubectl_ok};
use crate::processes::wait_until;

/// The objects of the release's manifest: (kind, namespace, name).
fn rendered() -> Vec<(String, Option<String>, String)> {
    let plane = installed().plane;
    let manifest = helm(plane, &["get", "manifest", RELEASE, "--namespace", RELEASE_NAMESPACE]);
    serde_norway::Deserializer::from_str(&manifest)
        .map(|doc| <Value as serde::Deserialize>::deserialize(doc).expect("YAML"))
        .filter(|v| v.is_object())
        .map(|object| {
            (
                object["kind"].as_str().expect("kind").to_string(),
                object["metadata"]["namespace"].as_str().map(str::to_string),
                object["metadata"]["name"].as_str().expect("name").to_string(),
            )
        })
        .collect()
}

#[test]
fn helm_installs_every_rendered_object_server_side() {
    let installed = installed();
    let plane = installed.plane;
    let status = helm(plane, &["status", RELEASE, "--namespace", RELEASE_NAMESPACE]);
    assert!(status.contains("STATUS: deployed"), "{status}");
    let objects = rendered();
    let kinds: std::collections::BTreeSet<&str> = objects.iter().map(|(k, _, _)| k.as_str()).collect();
    for wanted in [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "Secret",
        "Deployment",
        "NetworkPolicy",
        "Service",
        "ConfigMap",
    ] {
        assert!(kinds.contains(wanted), "the release renders a {wanted}: {kinds:?}");
    }
    for (kind, namespace, name) in &objects {
        let mut args =
            vec!["get", kind.as_str(), name.as_str(), "-o", "jsonpath={.metadata.managedFields[*].operation}"];
        if let Some(ns) = namespace {
            args.extend(["--namespace", ns.as_str()]);
        }
        let operations = kubectl_ok(plane, &args);
        assert!(
            operations.split_whitespace().any(|o| o == "Apply"),
            "{kind} {name} was applied server-side: {operations}"
        );
    }
}

#[test]
fn every_deployments_pods_are_admitted_under_restricted_pod_security() {
    let plane = installed().plane;
    let deployments: Vec<(String, String)> = rendered()
        .into_iter()
        .filter(|(kind, _, _)| kind == "Deployment")
        .map(|(_, ns, name)| (ns.unwrap_or_else(|| RELEASE_NAMESPACE.to_string()), name))
        .collect();
    assert!(deployments.len() >= 3, "{deployments:?}");
    for (namespace, name) in deployments {
        let enforced = kubectl_ok(
            plane,
            &[
                "get",
                "namespace",
                &namespace,
                "-o",
                "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}",
            ],
        );
        assert_eq!(enforced, "restricted", "{namespace} enforces restricted");
        let selector = kubectl_ok(
            plane,
            &["get", "deployment", &name, "-n", &namespace, "-o", "jsonpath={.spec.selector.matchLabels}"],
        );
        let labels: serde_json::Map<String, Value> = serde_json::from_str(&selector).expect("labels");
        let selector: Vec<String> =
            labels.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect();
        let selector = selector.join(",");
        wait_until(
            &format!("Deployment {namespace}/{name} has its pods created"),
            Duration::from_secs(60),
            || {
                let pods = plane.kubectl(&["get", "pods", "-n", &namespace, "-l", &selector, "-o", "name"]);
                !String::from_utf8_lossy(&pods.stdout).trim().is_empty()
            },
            || {
                let sets = plane.kubectl(&[
                    "get",
                    "replicasets",
                    "-n",
                    &namespace,
                    "-l",
                    &selector,
                    "-o",
                    "jsonpath={.items[*].status.conditions}",
                ]);
                format!("the ReplicaSets' conditions: {}", String::from_utf8_lossy(&sets.stdout))
            },
        );
        let failures = kubectl_ok(
            plane,
            &[
                "get",
                "replicasets",
                "-n",
                &namespace,
                "-l",
                &selector,
                "-o",
                "jsonpath={.items[*].status.conditions[?(@.type==\"ReplicaFailure\")].message}",
            ],
        );
        assert!(failures.trim().is_empty(), "{namespace}/{name}: {failures}");
    }
}
