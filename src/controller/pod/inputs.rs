//! The Secret of a run's inputs, mounted read-only in the runner at `/etc/yuxi/inputs`: `run.yaml` (the
//! AgentRun) and `agent.yaml` (the Agent), as the runner reads them with `--run` and `--agent`, and
//! `mcp-servers.yaml` when the settings configure MCP servers. A Secret, not a ConfigMap: the user's
//! input and the agent's prompt are not for the cluster's `view` role, which reads ConfigMaps.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Resource;
use serde::Serialize;

use super::error::PodError;
use super::settings::SandboxSettings;
use crate::resources::names::inputs_name;
use crate::resources::{Agent, AgentRun, Model};
use crate::run::inputs::{AGENT_KEY, MCP_SERVERS_KEY, MODEL_KEY, RUN_KEY};
use crate::run::trace::TRACEPARENT_ANNOTATION;

/// The inputs of `run` and `agent` as an `Opaque` Secret named by [`inputs_name`] in the run's namespace,
/// with `labels` and `owner_references`; immutable.
///
/// Errors: [`PodError::Encode`] naming the key whose content cannot be written as YAML (not expected for
/// objects that were read from YAML).
pub(super) fn inputs_secret(
    run: &AgentRun,
    agent: &Agent,
    model: Option<&Model>,
    settings: &SandboxSettings,
    labels: BTreeMap<String, String>,
    owner_references: Option<Vec<OwnerReference>>,
) -> Result<Secret, PodError> {
    let mut data = BTreeMap::from([
        (RUN_KEY.to_string(), input_manifest(run, RUN_KEY)?),
        (AGENT_KEY.to_string(), input_manifest(agent, AGENT_KEY)?),
    ]);
    if let Some(model) = model {
        data.insert(MODEL_KEY.to_string(), input_manifest(model, MODEL_KEY)?);
    }
    if !settings.mcp_servers.is_empty() {
        let servers = serde_norway::to_string(&settings.mcp_for_pod().0)
            .map_err(|e| PodError::Encode { field: MCP_SERVERS_KEY.to_string(), message: e.to_string() })?;
        data.insert(MCP_SERVERS_KEY.to_string(), servers);
    }
    Ok(Secret {
        metadata: ObjectMeta {
            name: Some(inputs_name(run)),
            namespace: run.metadata.namespace.clone(),
            labels: Some(labels),
            owner_references,
            ..ObjectMeta::default()
        },
        string_data: Some(data),
        type_: Some("Opaque".into()),
        immutable: Some(true),
        ..Secret::default()
    })
}

/// A manifest for the inputs: the object's kind, name, namespace, uid, labels, spec and the one
/// annotation the runner reads (the trace its run joins, [`crate::run::trace::TRACEPARENT_ANNOTATION`]),
/// without its status or the server's bookkeeping (managed fields, resource version, other
/// annotations), which the runner does not read.
fn input_manifest<K>(object: &K, key: &str) -> Result<String, PodError>
where
    K: Resource + Clone + Serialize,
{
    let mut object = object.clone();
    let meta = object.meta_mut();
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        labels: meta.labels.take(),
        annotations: meta.annotations.take().and_then(|a| {
            a.get_key_value(TRACEPARENT_ANNOTATION).map(|(k, v)| BTreeMap::from([(k.clone(), v.clone())]))
        }),
        ..ObjectMeta::default()
    };
    let mut value = serde_json::to_value(&object)
        .map_err(|e| PodError::Encode { field: key.to_string(), message: e.to_string() })?;
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
    }
    serde_norway::to_string(&value).map_err(|e| PodError::Encode { field: key.to_string(), message: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inputs_keep_the_runs_trace_and_no_other_annotation() {
        let mut run = AgentRun::new("r", crate::resources::AgentRunSpec::default());
        run.metadata.annotations = Some(BTreeMap::from([
            (TRACEPARENT_ANNOTATION.to_string(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string()),
            ("kubectl.kubernetes.io/last-applied-configuration".to_string(), "{\"secret\": 1}".to_string()),
        ]));
        let manifest = input_manifest(&run, RUN_KEY).expect("a manifest");
        assert!(manifest.contains("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), "{manifest}");
        assert!(!manifest.contains("last-applied-configuration"), "{manifest}");
    }
}
