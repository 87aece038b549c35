//! The CRDs: the checked-in `crds/` is what `yuxi-operator crd` prints, the schemas are structural and
//! described for `kubectl explain`, and every CEL rule says in one line what it wants. Whether a real API
//! server accepts them (its structural checks, CEL compilation and cost budget) is tested against one, in
//! `tests/kube/resources.rs`.

use serde_json::Value;
use yuxi_operator::resources::crd::{crd_files, crds_yaml};

use crate::support::repository::root;

#[test]
fn checked_in_crds_equal_the_generated_ones() {
    for (name, generated) in crd_files() {
        let path = root().join("crds").join(name);
        let checked_in = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(checked_in == generated, "{} drifted from `yuxi-operator crd`; run `make crds`", path.display());
    }
}

#[test]
fn the_crd_command_prints_every_file() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_yuxi-operator")).arg("crd").output().expect("runs");
    assert!(output.status.success());
    assert_eq!(String::from_utf8(output.stdout).expect("utf-8"), crds_yaml());
    assert_eq!(crds_yaml().matches("kind: CustomResourceDefinition").count(), crd_files().len());
}

fn schemas() -> Vec<(String, Value)> {
    crd_files()
        .into_iter()
        .map(|(name, yaml)| {
            let crd: Value = serde_norway::from_str(&yaml).expect("CRD YAML");
            (name.to_string(), crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone())
        })
        .collect()
}

/// Calls `visit(path, node)` on every schema node below `node`.
fn walk(path: &str, node: &Value, visit: &mut dyn FnMut(&str, &Value)) {
    visit(path, node);
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (key, child) in properties {
            walk(&format!("{path}.{key}"), child, visit);
        }
    }
    if let Some(items) = node.get("items") {
        walk(&format!("{path}[]"), items, visit);
    }
}

#[test]
fn schemas_are_structural() {
    for (name, schema) in schemas() {
        walk(&name, &schema, &mut |path, node| {
            for forbidden in ["oneOf", "anyOf", "allOf", "not", "$ref", "additionalProperties", "nullable"] {
                assert!(node.get(forbidden).is_none(), "{path} uses {forbidden}, which breaks a structural schema");
            }
            let typed =
                node.get("type").and_then(Value::as_str).is_some() || node.get("x-kubernetes-int-or-string").is_some();
            assert!(typed, "{path} has no type");
            if let Some(values) = node.get("enum") {
                assert_eq!(node["type"], "string", "{path}: an enum must be a typed string enum");
                assert!(values.as_array().is_some_and(|v| !v.is_empty()), "{path}: empty enum");
            }
            let described = node.get("description").and_then(Value::as_str).is_some_and(|d| !d.is_empty());
            let is_item = path.ends_with("[]");
            assert!(
                described
                    || is_item
                    || path.contains(".metadata")
                    || path.matches('.').count() == 0
                    || path.ends_with(".apiVersion")
                    || path.ends_with(".kind"),
                "{path} has no description for kubectl explain"
            );
        });
    }
}

#[test]
fn every_cel_rule_has_a_one_line_message() {
    let mut rules = 0;
    for (name, schema) in schemas() {
        walk(&name, &schema, &mut |path, node| {
            for rule in node.get("x-kubernetes-validations").and_then(Value::as_array).into_iter().flatten() {
                rules += 1;
                assert!(
                    rule["message"].as_str().is_some_and(|m| !m.is_empty() && !m.contains('\n')),
                    "{path}: {}: a rule needs a one-line message",
                    rule["rule"]
                );
            }
        });
    }
    assert!(rules >= 10, "found only {rules} CEL rules");
}

#[test]
fn the_charts_crds_are_the_generated_ones() {
    for (name, _) in crd_files() {
        let generated = std::fs::read_to_string(root().join("crds").join(name)).expect("crds/");
        let chart = std::fs::read_to_string(root().join("charts/yuxi-operator/crds").join(name))
            .expect("charts/yuxi-operator/crds/");
        assert!(chart == generated, "charts/yuxi-operator/crds/{name} differs from crds/{name}: run `make crds`");
    }
}
