//! The sandbox pod of a run on a Model resource: the Model's values reach the runner container only, and
//! the installation's own key not at all.

use super::*;
use crate::resources::manifest::{Manifest, parse_manifests};
use crate::resources::{AgentRunSpec, AgentSpec};
use crate::run::inputs::MODEL_KEY;

fn run(model: Option<&str>) -> AgentRun {
    let mut run = AgentRun::new(
        "chat",
        AgentRunSpec {
            agent: "writer".into(),
            input: "hi".into(),
            uid: Some("alice".into()),
            model: model.map(str::to_string),
            ..AgentRunSpec::default()
        },
    );
    run.metadata.namespace = Some("team-a".into());
    run
}

fn agent(model: &str) -> Agent {
    let mut agent: Agent = Agent::new("writer", AgentSpec::default());
    agent.spec.context = Some(crate::resources::AgentContext { model: Some(model.into()), ..Default::default() });
    agent.metadata.namespace = Some("team-a".into());
    agent
}

fn model(name: &str) -> Model {
    let text = format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Model\nmetadata: {{name: {name}, namespace: team-a}}\nspec:\n  provider: Anthropic\n  model: claude-sonnet-4-5\n  apiKeySecretRef: {{name: team-a-keys, key: anthropic}}\n  headers:\n  - {{name: X-Team, value: a}}\n  - name: X-Gateway\n    secretKeyRef: {{name: gateway, key: token}}\n  caBundleRef: {{name: roots, key: ca.crt}}"
    );
    match parse_manifests(&text).expect("parses").as_slice() {
        [Manifest::Model(model)] => (**model).clone(),
        other => panic!("not a Model: {other:?}"),
    }
}

fn containers(objects: &SandboxObjects) -> Vec<&k8s_openapi::api::core::v1::Container> {
    let spec = objects.pod.spec.as_ref().expect("a spec");
    spec.containers.iter().chain(spec.init_containers.iter().flatten()).collect()
}

/// (variable, Secret or ConfigMap, name, key) of every variable of `container` taken from an object.
fn references(container: &k8s_openapi::api::core::v1::Container) -> Vec<(String, &'static str, String, String)> {
    container
        .env
        .iter()
        .flatten()
        .filter_map(|var| {
            let from = var.value_from.as_ref()?;
            if let Some(secret) = &from.secret_key_ref {
                return Some((var.name.clone(), "Secret", secret.name.clone(), secret.key.clone()));
            }
            let map = from.config_map_key_ref.as_ref()?;
            Some((var.name.clone(), "ConfigMap", map.name.clone(), map.key.clone()))
        })
        .collect()
}

#[test]
fn a_run_on_a_model_gets_its_values_in_the_runner_and_no_installation_key() {
    let settings = SandboxSettings::default();
    assert!(settings.openai_api_key_secret.is_some(), "the default settings give an installation key");
    let objects = sandbox_objects_on(&run(None), &agent("claude"), Some(&model("claude")), &settings).expect("a pod");
    let [sandbox, runner] = [SANDBOX_CONTAINER, RUNNER_CONTAINER]
        .map(|name| *containers(&objects).iter().find(|c| c.name == name).expect("container"));
    let mut found = references(runner);
    found.retain(|(name, ..)| name.starts_with("YUXI_MODEL") || name == "OPENAI_API_KEY");
    let expected = [
        ("YUXI_MODEL_API_KEY", "Secret", "team-a-keys", "anthropic"),
        ("YUXI_MODEL_HEADER_1", "Secret", "gateway", "token"),
        ("YUXI_MODEL_CA_BUNDLE", "ConfigMap", "roots", "ca.crt"),
    ]
    .map(|(a, b, c, d)| (a.to_string(), b, c.to_string(), d.to_string()));
    assert_eq!(found, expected);
    let file = runner.env.iter().flatten().find(|v| v.name == "YUXI_MODEL_FILE").and_then(|v| v.value.clone());
    assert_eq!(file.as_deref(), Some("/etc/yuxi/inputs/model.yaml"));
    assert!(sandbox.env.as_ref().is_none_or(|env| env.is_empty()), "the sandbox gets no variable at all");
    let data = objects.inputs.string_data.as_ref().expect("inputs");
    let manifest = data.get(MODEL_KEY).expect("the Model is an input");
    assert!(manifest.contains("team-a-keys") && manifest.contains("claude-sonnet-4-5"), "{manifest}");
}

#[test]
fn a_run_on_an_endpoint_model_keeps_the_installation_key() {
    let settings = SandboxSettings::default();
    let objects = sandbox_objects_on(&run(None), &agent("openai/gpt-4o-mini"), None, &settings).expect("a pod");
    let runner = *containers(&objects).iter().find(|c| c.name == RUNNER_CONTAINER).expect("runner");
    assert!(references(runner).iter().any(|(name, ..)| name == "OPENAI_API_KEY"));
    assert!(!references(runner).iter().any(|(name, ..)| name.starts_with("YUXI_MODEL")));
    assert!(!objects.inputs.string_data.as_ref().expect("inputs").contains_key(MODEL_KEY));
}

#[test]
fn the_model_given_must_be_the_one_the_run_names() {
    let settings = SandboxSettings::default();
    let err = sandbox_objects_on(&run(None), &agent("claude"), None, &settings).expect_err("no Model");
    assert_eq!(
        err.to_string(),
        "agent spec.context.model: the run runs on the Model \"claude\", but no Model was given"
    );
    let err = sandbox_objects_on(&run(Some("other")), &agent("claude"), Some(&model("claude")), &settings)
        .expect_err("another Model");
    assert_eq!(err.field(), "spec.model");
    assert!(err.to_string().ends_with("the Model given is \"claude\""), "{err}");
}

#[test]
fn a_trace_collector_is_named_to_the_runner_only_with_its_headers_from_a_secret() {
    let settings = SandboxSettings {
        traces: Some(settings::TraceExport {
            endpoint: "http://otel-collector.observability.svc:4318".into(),
            headers_secret: Some(SecretKey { name: "otel-headers".into(), key: "headers".into() }),
            sampler_ratio: Some(0.25),
            protocol: Some("grpc".into()),
            capture_content: true,
        }),
        ..SandboxSettings::default()
    };
    let objects = sandbox_objects_on(&run(None), &agent("openai/gpt-4o-mini"), None, &settings).expect("a pod");
    let [sandbox, runner] = [SANDBOX_CONTAINER, RUNNER_CONTAINER]
        .map(|name| *containers(&objects).iter().find(|c| c.name == name).expect("container"));
    let value = |name: &str| runner.env.iter().flatten().find(|v| v.name == name).and_then(|v| v.value.clone());
    assert_eq!(value("OTEL_EXPORTER_OTLP_ENDPOINT").as_deref(), Some("http://otel-collector.observability.svc:4318"));
    assert_eq!(value("OTEL_TRACES_SAMPLER_ARG").as_deref(), Some("0.25"));
    assert_eq!(value("OTEL_EXPORTER_OTLP_PROTOCOL").as_deref(), Some("grpc"));
    assert_eq!(value("YUXI_TRACES_CAPTURE_CONTENT").as_deref(), Some("true"));
    assert!(references(runner).contains(&(
        "OTEL_EXPORTER_OTLP_HEADERS".to_string(),
        "Secret",
        "otel-headers".to_string(),
        "headers".to_string()
    )));
    assert!(sandbox.env.as_ref().is_none_or(|env| env.is_empty()));
    let bad = SandboxSettings {
        traces: Some(settings::TraceExport { endpoint: "otel:4318".into(), ..Default::default() }),
        ..SandboxSettings::default()
    };
    let err = sandbox_objects_on(&run(None), &agent("openai/gpt-4o-mini"), None, &bad).expect_err("refused");
    assert_eq!(err.field(), "traces.endpoint");
    let bad = SandboxSettings {
        traces: Some(settings::TraceExport {
            endpoint: "http://otel:4317".into(),
            protocol: Some("thrift".into()),
            ..Default::default()
        }),
        ..SandboxSettings::default()
    };
    let err = sandbox_objects_on(&run(None), &agent("openai/gpt-4o-mini"), None, &bad).expect_err("refused");
    assert_eq!(err.field(), "traces.protocol");
}
