//! The CustomResourceDefinitions, as the YAML checked in under `crds/` (and copied into the chart), and
//! their schemas, which also check manifests read without an API server.

use std::sync::OnceLock;

use kube::CustomResourceExt;
use serde_json::Value;

use super::{Agent, AgentRun, KnowledgeBase, Model};

/// A CRD as served: the derived definition, with `nullable` taken out of every field and `metadata.name`
/// declared.
///
/// Without `nullable`, the API server prunes an explicit `null` before validation, so `field: null` means
/// the same as an absent field, as it does for the validation module (serde reads both as `None`). With
/// `nullable: true`, a null would reach the CEL rules and fail them with "no such overload".
///
/// A rule's `fieldPath` must name a field of the schema, and the derived schema does not declare
/// `metadata`: the API server refuses the slug rule's `.metadata.name` ("must be a valid path") unless
/// the schema declares it. `name` (and `generateName`) are the only metadata fields a CRD may describe.
fn served(crd: impl serde::Serialize) -> Value {
    let mut value = serde_json::to_value(crd).expect("a CRD serializes");
    strip_nullable(&mut value);
    for version in value["spec"]["versions"].as_array_mut().into_iter().flatten() {
        let root = &mut version["schema"]["openAPIV3Schema"];
        root["properties"]["metadata"] =
            serde_json::json!({"type": "object", "properties": {"name": {"type": "string"}}});
    }
    value
}

fn strip_nullable(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("nullable");
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            map.values_mut().for_each(strip_nullable);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nullable),
        _ => {}
    }
}

/// How many CRDs there are.
const CRD_COUNT: usize = 5;

fn crds() -> &'static [(&'static str, &'static str, Value); CRD_COUNT] {
    static CRDS: OnceLock<[(&str, &str, Value); CRD_COUNT]> = OnceLock::new();
    CRDS.get_or_init(|| {
        [
            ("Agent", "agent.yaml", served(Agent::crd())),
            ("AgentRun", "agentrun.yaml", served(AgentRun::crd())),
            ("KnowledgeBase", "knowledgebase.yaml", served(KnowledgeBase::crd())),
            ("Model", "model.yaml", served(Model::crd())),
            ("McpServer", "mcpserver.yaml", served(super::mcp_server::McpServer::crd())),
        ]
    })
}

/// The file name under `crds/` and the YAML of each CRD, in a fixed order.
pub fn crd_files() -> [(&'static str, String); CRD_COUNT] {
    crds().each_ref().map(|(_, file, crd)| (*file, serde_norway::to_string(crd).expect("a CRD serializes to YAML")))
}

/// The CRDs as one multi-document YAML stream, as `yuxi-operator crd` prints it.
pub fn crds_yaml() -> String {
    crd_files().map(|(_, yaml)| yaml).join("---\n")
}

/// The `openAPIV3Schema` of the kind `Agent`, `AgentRun`, `KnowledgeBase` or `Model`.
pub fn schema(kind: &str) -> Option<&'static Value> {
    crds()
        .iter()
        .find(|(k, _, _)| *k == kind)
        .map(|(_, _, crd)| &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
}

/// The paths of the fields of `value` that the schema does not declare (`spec.contxt`), as the API
/// server's strict field validation reports them. `metadata` is not looked into.
pub fn unknown_fields(value: &Value, schema: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk_unknown(value, schema, "", &mut found);
    found
}

fn walk_unknown(value: &Value, schema: &Value, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
            for (key, child) in map {
                // Every object has these; the CRD schema need not declare them.
                if path.is_empty() && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                    continue;
                }
                let child_path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                match properties.get(key) {
                    None => found.push(child_path),
                    Some(child_schema) => walk_unknown(child, child_schema, &child_path, found),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk_unknown(item, item_schema, &format!("{path}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}
