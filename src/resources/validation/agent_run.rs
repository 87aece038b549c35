//! The rules of an AgentRun (docs/concepts/runs.md), the same as its CEL rules plus the schema's bounds
//! and the path-safe ids, with field paths; and what an update may change.

use super::{
    DNS1123_LABEL_HINT, Report, check_budget, check_len, check_namespace, is_dns1123_label, is_dns1123_subdomain,
};
use crate::resources::agent_run::{AgentRun, AgentRunSpec, TIMEOUT_SECONDS_RANGE};
use crate::resources::thread_id::{MAX_PARENT_THREAD_ID_LEN, is_child_thread_of, is_valid_id};

/// The single-object rules of an AgentRun:
/// - `spec.agent` is a DNS-1123 label (an Agent's slug);
/// - `spec.input` is 1 to 262144 characters;
/// - ids (`threadId`, the parent's ids) use the path-safe alphabet of [`is_valid_id`];
/// - with a parent, `threadId` (when set) is `<parent.threadId>_sub_<agent>_<8 hex digits>`;
/// - `timeoutSeconds` within 1..86400, `ttlSecondsAfterFinished` not negative.
pub fn validate_agent_run(run: &AgentRun) -> Report {
    let mut report = Report::default();
    check_namespace(&mut report, &run.metadata);
    match run.metadata.name.as_deref() {
        Some(name) if !is_dns1123_subdomain(name) => report.error(
            "metadata.name",
            format!("{name:?} is not an object name: at most 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or digit"),
        ),
        None | Some("") if run.metadata.generate_name.as_deref().unwrap_or_default().is_empty() => {
            report.error("metadata.name", "is required (or metadata.generateName)");
        }
        _ => {}
    }
    let spec = &run.spec;
    if spec.agent.is_empty() {
        report.error("spec.agent", "is required: name the Agent to run");
    } else if !is_dns1123_label(&spec.agent) {
        report.error("spec.agent", format!("{:?} is not an Agent name: it {DNS1123_LABEL_HINT}", spec.agent));
    }
    check_len(&mut report, "spec.input", &spec.input, 1, 262_144);
    check_id(&mut report, "spec.threadId", spec.thread_id.as_deref());
    if let Some(uid) = &spec.uid {
        // The uid is a path segment of the run's volumes (users/<uid>/...): refused here, at admission,
        // not only later by the pod builder.
        check_len(&mut report, "spec.uid", uid, 1, 128);
        if (1..=128).contains(&uid.chars().count()) {
            check_id(&mut report, "spec.uid", Some(uid));
        }
    }
    if let Some(model) = &spec.model {
        check_len(&mut report, "spec.model", model, 1, 256);
    }
    if let Some(parent) = &spec.parent {
        check_id(&mut report, "spec.parent.runId", Some(&parent.run_id));
        check_id(&mut report, "spec.parent.threadId", Some(&parent.thread_id));
        if parent.thread_id.len() > MAX_PARENT_THREAD_ID_LEN {
            report.error(
                "spec.parent.threadId",
                format!(
                    "must be at most {MAX_PARENT_THREAD_ID_LEN} characters, so that its child thread ids fit (has {})",
                    parent.thread_id.len()
                ),
            );
        }
        check_id(&mut report, "spec.parent.fileThreadId", parent.file_thread_id.as_deref());
        check_id(&mut report, "spec.parent.rootRunId", parent.root_run_id.as_deref());
        if let Some(tool_call_id) = &parent.tool_call_id {
            check_len(&mut report, "spec.parent.toolCallId", tool_call_id, 1, 256);
        }
        if !is_dns1123_label(&parent.agent) {
            report.error(
                "spec.parent.agent",
                format!("{:?} is not an Agent name: it {DNS1123_LABEL_HINT}", parent.agent),
            );
        }
        if let Some(thread_id) = &spec.thread_id
            && !is_child_thread_of(thread_id, &parent.thread_id, &spec.agent)
        {
            report.error(
                "spec.threadId",
                format!(
                    "{thread_id:?} is not a child thread of parent thread {:?} for agent {:?}: it must be {}_sub_{}_<8 lowercase hex digits>",
                    parent.thread_id, spec.agent, parent.thread_id, spec.agent
                ),
            );
        }
    }
    if let Some(timeout) = spec.timeout_seconds
        && !TIMEOUT_SECONDS_RANGE.contains(&timeout)
    {
        report.error(
            "spec.timeoutSeconds",
            format!(
                "must be within {}..{} seconds (is {timeout})",
                TIMEOUT_SECONDS_RANGE.start(),
                TIMEOUT_SECONDS_RANGE.end()
            ),
        );
    }
    if let Some(ttl) = spec.ttl_seconds_after_finished
        && ttl < 0
    {
        report.error("spec.ttlSecondsAfterFinished", format!("must not be negative (is {ttl})"));
    }
    check_budget(&mut report, "spec.budget.maxTokens", spec.budget.as_ref());
    report
}

fn check_id(report: &mut Report, field: &str, id: Option<&str>) {
    if let Some(id) = id
        && !is_valid_id(id)
    {
        report.error(
            field,
            format!("{id:?} is not a valid id: 1 to 253 characters of letters, digits, '.', '_' and '-', starting with a letter or digit"),
        );
    }
}

/// The update rules of an AgentRun: every spec field but `cancel` is immutable, and `cancel` may only go
/// from unset or false to true. Returns one error per changed field.
pub fn validate_agent_run_update(old: &AgentRun, new: &AgentRun) -> Report {
    let mut report = Report::default();
    let (o, n): (&AgentRunSpec, &AgentRunSpec) = (&old.spec, &new.spec);
    let changed = [
        ("spec.agent", o.agent != n.agent),
        ("spec.input", o.input != n.input),
        ("spec.threadId", o.thread_id != n.thread_id),
        ("spec.parent", o.parent != n.parent),
        ("spec.uid", o.uid != n.uid),
        ("spec.timeoutSeconds", o.timeout_seconds != n.timeout_seconds),
        ("spec.ttlSecondsAfterFinished", o.ttl_seconds_after_finished != n.ttl_seconds_after_finished),
        ("spec.model", o.model != n.model),
        ("spec.budget", o.budget != n.budget),
    ];
    for (field, _) in changed.iter().filter(|(_, changed)| *changed) {
        report
            .error(*field, "is immutable after creation; create a new AgentRun instead (only spec.cancel may change)");
    }
    if o.is_cancel_requested() && !n.is_cancel_requested() {
        report.error("spec.cancel", "a requested cancel cannot be withdrawn");
    }
    report
}
