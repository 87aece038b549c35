//! The CustomResourceDefinitions, as the YAML checked in under `crds/` (and copied into the chart).

use kube::CustomResourceExt;

use super::{Agent, AgentRun};

/// The file name under `crds/` and the YAML of each CRD, in a fixed order.
pub fn crd_files() -> [(&'static str, String); 2] {
    [("agent.yaml", to_yaml(&Agent::crd())), ("agentrun.yaml", to_yaml(&AgentRun::crd()))]
}

/// Both CRDs as one multi-document YAML stream, as `yuxi-operator crd` prints it.
pub fn crds_yaml() -> String {
    crd_files().map(|(_, yaml)| yaml).join("---\n")
}

fn to_yaml<T: serde::Serialize>(value: &T) -> String {
    serde_norway::to_string(value).expect("a CRD always serializes to YAML")
}
