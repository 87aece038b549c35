//! The operator against a real Kubernetes API server: etcd, kube-apiserver and kube-controller-manager
//! built from pinned sources (`scripts/kube-bin`) and run on this machine, in a network namespace of the
//! test's own (`scripts/kube-netns`). What only a real server decides is tested here: the CRDs' schemas
//! and CEL rules and their cost, server-side apply, the chart installed by Helm, the admission webhook
//! called by the server over TLS, the admission policy, RBAC, TokenReview, garbage collection, leases and
//! watches across a restart of the API server.
//!
//! Run with `make kube-test` (part of `make test`); docs/operations/testing.md describes the tiers.

#[path = "kube/chart_pods.rs"]
mod chart_pods;
#[path = "kube/control_plane.rs"]
mod control_plane;
#[path = "kube/install.rs"]
mod install;
// Key rotation and the provider's own HTTP client are the local-mode tests'.
#[allow(dead_code)]
#[path = "support/oidc_provider.rs"]
mod oidc_provider;
#[path = "kube/processes.rs"]
mod processes;

#[path = "kube/admission.rs"]
mod admission;
#[path = "kube/chart.rs"]
mod chart;
#[path = "kube/controller.rs"]
mod controller;
#[path = "kube/facade.rs"]
mod facade;
#[path = "kube/identity.rs"]
mod identity;
#[path = "kube/leases_and_watches.rs"]
mod leases_and_watches;
#[path = "kube/mcp_servers.rs"]
mod mcp_servers;
#[path = "kube/models.rs"]
mod models;
#[path = "kube/rbac.rs"]
mod rbac;
#[path = "kube/resources.rs"]
mod resources;
#[path = "kube/traces.rs"]
mod traces;
#[path = "kube/warm_pools.rs"]
mod warm_pools;

/// A fresh name for an object or a file, unique in this test binary: `<prefix>-<n>`.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    format!("{prefix}-{}", COUNTER.fetch_add(1, Ordering::SeqCst))
}
