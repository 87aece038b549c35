//! Stand-ins for the Kubernetes API server, on kube's mock service: for the exact requests a role sends
//! and for answers a real server gives rarely on demand (a lost race, an outage). What only a real
//! server decides is tested against one, in `tests/kube/`. [`scripted`] answers a fixed script of
//! exchanges in order, [`routed`] answers each request by its route.

pub mod routed;
pub mod scripted;
