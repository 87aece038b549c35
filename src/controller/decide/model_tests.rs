//! `decide` for runs on Model resources: a missing Model fails the run before any pod is made.

use serde_json::json;

use super::*;

fn run(model: Option<&str>) -> AgentRun {
    serde_json::from_value(json!({
        "apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun",
        "metadata": {"name": "r1", "namespace": "team-a", "uid": "u-1", "creationTimestamp": "2026-12-05T10:00:00Z"},
        "spec": {"agent": "writer", "input": "hi", "uid": "alice", "threadId": "t1", "model": model},
    }))
    .expect("an AgentRun")
}

fn agent(model: &str) -> Agent {
    serde_json::from_value(json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": "writer", "namespace": "team-a"}, "spec": {"backend": "ChatbotAgent", "context": {"model": model}}}))
    .expect("an Agent")
}

fn model(name: &str) -> crate::resources::Model {
    serde_json::from_value(json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Model",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"provider": "OpenAICompatible", "preset": "deepseek", "model": "deepseek-chat"}}))
    .expect("a Model")
}

fn decide_on(run: &AgentRun, agent: &Agent, model: Option<&crate::resources::Model>) -> Vec<Action> {
    let now = "2026-12-05T10:00:01Z".parse().expect("time");
    let observed = Observed {
        run,
        pod: None,
        agent: Some(agent),
        model,
        outcome: None,
        quota: None,
        recorded: None,
        traces: None,
        mcp_servers: Default::default(),
        now,
    };
    decide(&observed, &Settings::default())
}

fn phase_and_reason(actions: &[Action]) -> (Option<AgentRunPhase>, Option<String>) {
    actions
        .iter()
        .find_map(|a| match a {
            Action::SetStatus(status) => Some((status.phase, status.reason.clone())),
            _ => None,
        })
        .expect("a status")
}

#[test]
fn a_run_on_a_missing_model_fails_without_a_pod() {
    for (run, agent) in [(run(None), agent("deepseek")), (run(Some("deepseek")), agent("openai/gpt-4o"))] {
        let actions = decide_on(&run, &agent, None);
        assert_eq!(phase_and_reason(&actions), (Some(AgentRunPhase::Failed), Some("ModelNotFound".into())));
        assert!(!actions.iter().any(|a| matches!(a, Action::CreatePod(_))));
        // The Model of another name is no better than none.
        let other = model("qwen");
        let actions = decide_on(&run, &agent, Some(&other));
        assert_eq!(phase_and_reason(&actions).1.as_deref(), Some("ModelNotFound"));
    }
}

#[test]
fn a_run_on_an_existing_model_gets_a_pod_with_it() {
    let found = model("deepseek");
    let actions = decide_on(&run(None), &agent("deepseek"), Some(&found));
    let created = actions.iter().find_map(|a| match a {
        Action::CreatePod(objects) => Some(objects),
        _ => None,
    });
    let inputs = created.expect("a pod").inputs.string_data.clone().expect("inputs");
    assert!(inputs.contains_key(crate::run::inputs::MODEL_KEY));
    assert_eq!(phase_and_reason(&actions).0, Some(AgentRunPhase::Pending));
}

#[test]
fn a_run_on_an_endpoint_model_needs_no_model_resource() {
    let actions = decide_on(&run(None), &agent("openai/gpt-4o-mini"), None);
    assert!(actions.iter().any(|a| matches!(a, Action::CreatePod(_))));
}

#[test]
fn a_namespaces_own_collector_replaces_the_installations_and_a_broken_one_exports_nothing() {
    let mut settings = Settings::default();
    settings.sandbox.traces = Some(crate::controller::pod::TraceExport {
        endpoint: "http://platform-collector:4318".into(),
        ..Default::default()
    });
    let endpoint_of = |traces: Option<crate::controller::pod::TraceExport>| {
        let (run, agent) = (run(None), agent("openai/gpt-4o-mini"));
        let now = "2026-12-05T10:00:01Z".parse().expect("time");
        let observed = Observed {
            run: &run,
            pod: None,
            agent: Some(&agent),
            model: None,
            outcome: None,
            quota: None,
            recorded: None,
            traces,
            mcp_servers: Default::default(),
            now,
        };
        let actions = decide(&observed, &settings);
        let objects = actions
            .iter()
            .find_map(|a| match a {
                Action::CreatePod(objects) => Some(objects.clone()),
                _ => None,
            })
            .expect("a pod");
        let spec = objects.pod.spec.expect("spec");
        let runner = spec.containers.iter().find(|c| c.name == "runner").expect("runner").clone();
        runner
            .env
            .unwrap_or_default()
            .into_iter()
            .find(|v| v.name == "OTEL_EXPORTER_OTLP_ENDPOINT")
            .and_then(|v| v.value)
    };
    assert_eq!(endpoint_of(None).as_deref(), Some("http://platform-collector:4318"));
    let team =
        crate::controller::pod::TraceExport { endpoint: "http://team-a-tempo:4318".into(), ..Default::default() };
    assert_eq!(endpoint_of(Some(team)).as_deref(), Some("http://team-a-tempo:4318"));
    assert_eq!(endpoint_of(Some(Default::default())), None, "a broken ConfigMap sends nowhere, not to the platform's");
}
