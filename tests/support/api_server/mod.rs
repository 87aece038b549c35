//! Stand-ins for the Kubernetes API server, on kube's mock service (no cluster is reachable from the test
//! machine): [`scripted`] answers a fixed script of exchanges in order, [`routed`] answers each request by
//! its route.

pub mod routed;
pub mod scripted;
