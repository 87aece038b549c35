//! The CRDs' CEL rules evaluated on an object as the API server evaluates them, by kube's client-side
//! evaluator.

/// Evaluates the served CRD's CEL rules for `kind` on `object` (and `old`, for an update), after pruning
/// explicit nulls as the API server does for fields that are not nullable. Returns the failing field
/// paths (without a leading dot).
pub fn cel_failures(kind: &str, object: &serde_json::Value, old: Option<&serde_json::Value>) -> Vec<String> {
    let schema = yuxi_operator::resources::crd::schema(kind).expect("a served kind");
    let object = prune_nulls(object.clone());
    let old = old.map(|o| prune_nulls(o.clone()));
    match kube::core::cel::Validator::new().validate(schema, &object, old.as_ref()) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.field_path.trim_start_matches('.').to_string()).collect(),
    }
}

/// Drops every null-valued field, as the API server prunes nulls of fields that are not nullable.
pub fn prune_nulls(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, prune_nulls(v))).collect()
        }
        serde_json::Value::Array(items) => items.into_iter().map(prune_nulls).collect(),
        other => other,
    }
}
