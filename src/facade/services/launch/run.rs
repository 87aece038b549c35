//! What both launchers share: the AgentRun of a run record ([`agent_run`]), the check that the runner
//! would accept it before anything starts ([`check_startable`]), and what follows the end of every run
//! ([`end_of_run`]).

use kube::core::ObjectMeta;

use crate::facade::http::error::ApiError;
use crate::resources::names::{AGENT_LABEL, PARENT_RUN_LABEL, label_value};
use crate::resources::{AgentRun, AgentRunSpec};
use crate::run::RunRecord;
use crate::store::Store;

/// What follows the end of every run: its unfinished children are cancelled (a parent that ends leaves no
/// child running). Its credentials stop working by themselves: a run token is refused once its run's
/// record is terminal. Failures are logged: the run has ended regardless.
pub async fn end_of_run(store: &Store, run_id: &str) {
    match store.cancel_children(run_id).await {
        Ok(0) => {}
        Ok(n) => tracing::info!(run_id = %run_id, children = n, "cancelled the ended run's unfinished children"),
        Err(err) => tracing::error!(run_id = %run_id, error = %err, "cannot cancel the ended run's children"),
    }
}

/// Checks the AgentRun that `record` and `input` make by every rule the runner (and, in a cluster, the
/// admission webhook) applies to it, before anything is started or claimed: a request the runner would
/// refuse answers 422 here instead of ending as an `interrupted` run. The request's own field names are
/// used: `spec.input` is `input_field` (`query`, `description`), `spec.parent.toolCallId` is
/// `parent.tool_call_id`, `spec.threadId` is `thread_id`, `spec.parent.threadId` is `parent.thread_id`.
///
/// Errors: [`ApiError::Invalid`] naming the first broken rule's field.
pub fn check_startable(record: &RunRecord, input: &str, input_field: &str) -> Result<(), ApiError> {
    let report = crate::resources::validation::validate_agent_run(&agent_run(record, input.to_string()));
    let Some(issue) = report.errors.first() else { return Ok(()) };
    let field = match issue.field.as_str() {
        "spec.input" => input_field.to_string(),
        "spec.parent.toolCallId" => "parent.tool_call_id".to_string(),
        "spec.parent.threadId" => "parent.thread_id".to_string(),
        "spec.parent.runId" => "parent.run_id".to_string(),
        "spec.parent.fileThreadId" => "parent.file_thread_id".to_string(),
        "spec.parent.agent" => "parent.agent".to_string(),
        "spec.threadId" => "thread_id".to_string(),
        other => other.to_string(),
    };
    Err(ApiError::invalid(field, issue.message.clone()))
}

/// The AgentRun of a run record, as both launchers start it: named by the run id, labelled with its agent
/// and parent run (as label values, see [`label_value`], so a long parent run id
/// still makes a valid label; the controller selects children by the same value).
pub fn agent_run(record: &RunRecord, input: String) -> AgentRun {
    let mut labels = std::collections::BTreeMap::from([(AGENT_LABEL.to_string(), label_value(&record.agent_slug))]);
    if let Some(parent) = &record.parent {
        labels.insert(PARENT_RUN_LABEL.to_string(), label_value(&parent.run_id));
    }
    let mut run = AgentRun::new(
        &record.run_id,
        AgentRunSpec {
            agent: record.agent_slug.clone(),
            input,
            thread_id: Some(record.thread_id.clone()),
            parent: record.parent.clone(),
            uid: Some(record.uid.clone()),
            model: record.request.model_spec.clone(),
            budget: record.max_tokens.map(|max| crate::resources::RunBudget { max_tokens: Some(max), max_cost: None }),
            ..AgentRunSpec::default()
        },
    );
    // The trace the run's span joins, for the runner (a pod's reads its AgentRun in its inputs).
    let annotations = record.request.traceparent.as_ref().map(|traceparent| {
        std::collections::BTreeMap::from([(crate::run::trace::TRACEPARENT_ANNOTATION.to_string(), traceparent.clone())])
    });
    // When the run was created, for its runner's queue time (the API server sets its own on a create).
    let creation_timestamp =
        record.created_at.parse::<jiff::Timestamp>().ok().map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time);
    run.metadata = ObjectMeta {
        name: Some(record.run_id.clone()),
        labels: Some(labels),
        annotations,
        creation_timestamp,
        ..ObjectMeta::default()
    };
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::ParentRef;
    use crate::run::RunStatus;

    #[test]
    fn a_long_parent_run_id_still_makes_a_valid_label_the_controller_selects_by() {
        let parent_run = format!("runtime_{}", "x".repeat(150));
        let record = RunRecord {
            run_id: "r1".into(),
            thread_id: "t1_sub_research-explorer_0000abcd".into(),
            agent_slug: "research-explorer".into(),
            uid: "alice".into(),
            parent: Some(ParentRef { run_id: parent_run.clone(), thread_id: "t1".into(), ..ParentRef::default() }),
            status: RunStatus::Pending,
            error: None,
            created_at: "2026-11-30T10:00:00Z".into(),
            request: Default::default(),
            max_tokens: None,
            waiting: None,
            approvals: Vec::new(),
            ended_at: None,
            principal: None,
        };
        let run = agent_run(&record, "look".into());
        let label = &run.metadata.labels.as_ref().expect("labels")[PARENT_RUN_LABEL];
        assert!(label.len() <= 63 && label != &parent_run, "{label}");
        assert_eq!(label, &crate::resources::names::label_value(&parent_run));
        assert_eq!(
            run.spec.parent.as_ref().map(|p| p.run_id.as_str()),
            Some(parent_run.as_str()),
            "the spec keeps it whole"
        );
    }
}
