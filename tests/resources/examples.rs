//! The example manifests: every file in `examples/` passes every rule, and every file in
//! `examples/invalid/` is rejected for its one rule alone, by the validation module. That a real API
//! server (the CRDs' schemas and CEL rules, the webhook) admits the first and refuses the second naming
//! the same field is tested against one, in `tests/kube/resources.rs`.

use serde_json::{Value, json};
use yuxi_operator::resources::manifest::{Manifest, ManifestError, read_manifest_file};
use yuxi_operator::resources::validation::{
    Report, validate_agent, validate_agent_among, validate_agent_run, validate_agent_run_update, validate_config_map,
    validate_knowledge_base, validate_model,
};

use crate::support::examples::{example_agents, example_manifests, expectation};
use crate::support::repository::yaml_files;

#[test]
fn every_example_passes_validation_without_warnings() {
    let agents = example_agents();
    let manifests = example_manifests();
    assert!(manifests.len() >= 5, "the examples hold the four agents and a run");
    for (path, manifest) in manifests {
        let report = match &manifest {
            Manifest::Agent(agent) => {
                let mut report = validate_agent(agent);
                report.extend(validate_agent_among(agent, &agents));
                report
            }
            Manifest::AgentRun(run) => validate_agent_run(run),
            Manifest::KnowledgeBase(kb) => validate_knowledge_base(kb),
            Manifest::Model(model) => validate_model(model),
            Manifest::ConfigMap(config_map) => validate_config_map(config_map),
            Manifest::McpServer(server) => yuxi_operator::resources::validation::validate_mcp_server(server),
        };
        assert_eq!(report, Report::default(), "{}", path.display());
    }
}

/// What the validation module says about one invalid example: an update for a two-document file (the
/// object as created, then the change), a creation otherwise.
fn judge(manifests: &[Manifest]) -> Report {
    match manifests {
        [Manifest::Agent(agent)] => {
            let mut report = validate_agent(agent);
            report.extend(validate_agent_among(agent, &example_agents()));
            report
        }
        [Manifest::AgentRun(run)] => validate_agent_run(run),
        [Manifest::KnowledgeBase(kb)] => validate_knowledge_base(kb),
        [Manifest::Model(model)] => validate_model(model),
        [Manifest::AgentRun(old), Manifest::AgentRun(new)] => {
            let mut report = validate_agent_run(new);
            report.extend(validate_agent_run_update(old, new));
            report
        }
        other => panic!("an invalid example holds one object or an AgentRun update, not {} documents", other.len()),
    }
}

#[test]
fn every_invalid_example_is_rejected_for_its_rule_alone() {
    let files = yaml_files("examples/invalid");
    assert!(files.len() >= 15, "one invalid example per rule");
    for path in files {
        let expect = expectation(&path);
        let shown = path.display();
        match read_manifest_file(&path) {
            // A missing required field stops decoding; the error names the field.
            Err(ManifestError::Field { field, message, .. }) => {
                assert_eq!(field, expect.field, "{shown}: {message}");
                assert!(
                    expect.enforced_by.contains(&"schema".to_string()),
                    "{shown}: only the schema can reject an undecodable object"
                );
            }
            Err(other) => panic!("{shown}: {other}"),
            Ok(manifests) => {
                let report = judge(&manifests);
                let fields: Vec<&str> = report.errors.iter().map(|e| e.field.as_str()).collect();
                assert_eq!(fields, vec![expect.field.as_str()], "{shown}: {:?}", report.errors);
                assert!(!report.errors[0].message.is_empty());
            }
        }
    }
}

/// Explicit nulls mean "absent" to the validation module (serde), as to the API server (which prunes
/// nulls of fields that are not nullable, and no field of these CRDs is; `tests/kube/resources.rs`
/// applies the same objects to one).
#[test]
fn explicit_nulls_are_absent_fields_for_the_module() {
    let agents = [
        json!({"backend": "SubAgentBackend", "default": null, "isSubagent": null}),
        json!({"backend": "SubAgentBackend", "context": {"subagents": null, "tools": null}}),
        json!({"backend": "ChatbotAgent", "share": {"readScope": {"accessLevel": "User", "userUids": ["u"]}, "manageScope": null}}),
        json!({"backend": "ChatbotAgent", "context": null, "share": null}),
    ];
    for spec in agents {
        let object =
            json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent", "metadata": {"name": "a"}, "spec": spec});
        let agent = yuxi_operator::resources::manifest::decode::<yuxi_operator::resources::Agent>(object.clone(), 1)
            .expect("decodes");
        assert!(validate_agent(&agent).is_ok(), "{spec}");
    }
    let run = |spec: Value| json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun", "metadata": {"name": "r"}, "spec": spec});
    let created = run(json!({"agent": "a", "input": "x", "uid": null, "cancel": null}));
    let updated = run(json!({"agent": "a", "input": "x", "model": null, "parent": null, "cancel": false}));
    let (old, new) = (
        yuxi_operator::resources::manifest::decode(created, 1).expect("decodes"),
        yuxi_operator::resources::manifest::decode(updated, 1).expect("decodes"),
    );
    assert!(validate_agent_run_update(&old, &new).is_ok());
}

/// The Models of `examples/models/` (a folder of their own: the local mode serves `examples/`, and does
/// not serve Models yet) pass every rule, and there is one of each kind of endpoint they show.
#[test]
fn every_example_model_passes_validation() {
    let mut providers = Vec::new();
    for path in yaml_files("examples/models") {
        for manifest in read_manifest_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
            let Manifest::Model(model) = manifest else { panic!("{}: only Models", path.display()) };
            assert_eq!(validate_model(&model), Report::default(), "{}", path.display());
            yuxi_operator::resources::model::resolve(&model.spec).expect("an endpoint");
            providers.push(model.spec.provider.as_str());
        }
    }
    assert_eq!(providers, ["OpenAICompatible", "OpenAICompatible", "AzureOpenAI", "Bedrock"]);
}
