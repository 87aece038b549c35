//! The sandbox pod builder (placeholder API; the builder lands separately).

use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::ResourceExt;

use crate::resources::{Agent, AgentRun};

/// Settings of sandbox pods.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SandboxSettings {}

/// What a run needs created.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxObjects {
    /// The pod.
    pub pod: Pod,
    /// Its inputs.
    pub inputs: ConfigMap,
}

/// A pod could not be built.
#[derive(Debug, thiserror::Error)]
#[error("{field}: {message}")]
pub struct PodError {
    /// The field.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

/// The run's pod name.
pub fn pod_name(run: &AgentRun) -> String {
    format!("yuxi-run-{}", run.name_any())
}

/// Builds the objects.
pub fn sandbox_objects(
    run: &AgentRun,
    _agent: &Agent,
    _settings: &SandboxSettings,
) -> Result<SandboxObjects, PodError> {
    if run.spec.uid.as_deref().is_some_and(|u| u.contains('/')) {
        return Err(PodError { field: "spec.uid".into(), message: "is not a valid id".into() });
    }
    let mut pod = Pod::default();
    pod.metadata.name = Some(pod_name(run));
    Ok(SandboxObjects { pod, inputs: ConfigMap::default() })
}
