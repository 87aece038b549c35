//! What a parent agent's model is told about delegation: the subagent tools' JSON schemas and the prompt
//! section that lists the allowed subagents with guidance on `task` versus `subagent_start`
//! (Yuxi's subagent design, "同步调用与异步调用": docs/concepts/delegation.md). Served by `GET /api/tools` and used by the task middleware.

use kube::ResourceExt;
use serde_json::{Value, json};

use super::{MAX_AWAIT_SECONDS, MAX_EVENTS_LIMIT, MAX_WAIT_ANY_RUNS};
use crate::resources::Agent;
use crate::run::RunStatus;

/// The seven subagent tools, each `{name, description, parameters}` (parameters a JSON Schema).
pub fn tool_schemas() -> Vec<Value> {
    let run_id = json!({"type": "string", "description": "The run_id that subagent_start or task returned"});
    vec![
        json!({"name": "task", "description": "Delegate a short task to a subagent and wait for its final answer. Use it when you need the result now.",
               "parameters": {"type": "object", "required": ["description", "subagent_slug"], "properties": {
                   "description": {"type": "string", "description": "The whole task, self-contained: the subagent sees nothing else"},
                   "subagent_slug": {"type": "string", "description": "Which subagent"},
                   "thread_id": {"type": "string", "description": "Continue an earlier subagent thread (from an earlier result); omit for a new task"}}}}),
        json!({"name": "subagent_start", "description": "Start a subagent run in the background and return its run_id at once. Use it for long tasks, or to run several subagents in parallel.",
               "parameters": {"type": "object", "required": ["description", "subagent_slug"], "properties": {
                   "description": {"type": "string"}, "subagent_slug": {"type": "string"}, "thread_id": {"type": "string"}}}}),
        json!({"name": "subagent_status", "description": "The status of a subagent run, with its latest progress; the result once it has ended.",
               "parameters": {"type": "object", "required": ["run_id"], "properties": {"run_id": run_id}}}),
        json!({"name": "subagent_events", "description": "A subagent run's events after a cursor; with tree, its descendants' too, each naming its run.",
               "parameters": {"type": "object", "required": ["run_id"], "properties": {"run_id": run_id,
                   "after_seq": {"type": "string", "description": "The last_seq of the previous call; default 0-0"},
                   "limit": {"type": "integer", "minimum": 1, "maximum": MAX_EVENTS_LIMIT},
                   "tree": {"type": "boolean", "description": "Also the events of the runs it started, and theirs"}}}}),
        json!({"name": "subagent_cancel", "description": "Cancel a subagent run.",
               "parameters": {"type": "object", "required": ["run_id"], "properties": {"run_id": run_id}}}),
        json!({"name": "subagent_await", "description": "Wait for a subagent run to end and return its result; on time-out, its current status.",
               "parameters": {"type": "object", "required": ["run_id"], "properties": {"run_id": run_id,
                   "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_AWAIT_SECONDS}}}}),
        json!({"name": "subagent_wait_any", "description": "Wait until the first of several subagent runs ends and return it; the others keep running.",
               "parameters": {"type": "object", "required": ["run_ids"], "properties": {
                   "run_ids": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_WAIT_ANY_RUNS,
                               "description": "Run ids that subagent_start returned"},
                   "timeout_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_AWAIT_SECONDS,
                                       "description": "How long to wait; 0 answers at once"}}}}),
    ]
}

/// The prompt section listing `allowed` (`- slug: description`) with the guidance on which tool to use;
/// `None` when no subagent is allowed (then the tools are not offered either).
pub fn subagent_prompt(allowed: &[&Agent]) -> Option<String> {
    if allowed.is_empty() {
        return None;
    }
    let mut prompt = String::from("## Subagents\n\nYou can delegate work to these subagents:\n\n");
    for agent in allowed {
        let description =
            agent.spec.description.as_deref().unwrap_or_default().split_whitespace().collect::<Vec<_>>().join(" ");
        prompt.push_str(&format!("- {}: {}\n", agent.name_any(), description));
    }
    prompt.push_str(
        "\nUse `task` for a short task whose result you need before you go on. For long tasks, or several at once, \
         use `subagent_start`, keep working, and collect the results with `subagent_await` or `subagent_wait_any` \
         (or check on them with `subagent_status`); you are told when a run you started ends. Give each subagent a complete, self-contained description: it sees nothing of this \
         conversation. To continue a subagent's earlier work, pass the thread_id from its result. Never call \
         subagents through shell commands or HTTP.\n",
    );
    Some(prompt)
}

/// What a parent's model is told, before its next turn, when a run it started with `subagent_start`
/// has ended without the parent having asked: the run, its subagent, its status and where its result is.
pub fn child_ended_notice(run_id: &str, subagent_slug: &str, status: RunStatus) -> String {
    format!(
        "[notice] The subagent run {run_id} ({subagent_slug}) that you started has ended: {status}. \
         Read its result with subagent_await (run_id {run_id}); it is also at {}.",
        super::wire::result_url(run_id)
    )
}

/// How a `task` call ended, for [`task_content`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TaskOutcome<'a> {
    /// The run completed, with its final text when it has one.
    Completed(Option<&'a str>),
    /// The run ended otherwise: its status (`failed`, `cancelled`, `interrupted`) and error.
    Ended(RunStatus, Option<&'a str>),
    /// The wait ended first: the run (still going).
    StillRunning(&'a str),
}

/// What the parent's model reads from `task` (Yuxi's form): `> 子智能体线程 ID: <thread_id>`, a `---`
/// rule, then the final text, the error, or how to follow a run still going.
pub fn task_content(thread_id: &str, outcome: TaskOutcome<'_>) -> String {
    let text = match outcome {
        TaskOutcome::Completed(Some(text)) if !text.is_empty() => text.to_string(),
        TaskOutcome::Completed(_) => "The subagent completed without a text answer.".to_string(),
        TaskOutcome::Ended(status, error) => format!("The subagent run ended {status}: {}", error.unwrap_or_default()),
        TaskOutcome::StillRunning(run_id) => format!(
            "The subagent is still running (run_id {run_id}); use subagent_status or subagent_await with this run_id."
        ),
    };
    format!("> 子智能体线程 ID: {thread_id}\n\n---\n\n{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_lists_the_allowed_subagents_and_nothing_when_none() {
        let agent: Agent = serde_norway::from_str(
            "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {name: explorer}\nspec: {backend: SubAgentBackend, description: \"Reads\\n widely.\"}\n",
        )
        .expect("agent");
        let prompt = subagent_prompt(&[&agent]).expect("a prompt");
        assert!(prompt.contains("- explorer: Reads widely.\n"), "{prompt}");
        assert!(prompt.contains("`subagent_start`") && prompt.contains("`task`"));
        assert_eq!(subagent_prompt(&[]), None);
        let schemas = tool_schemas();
        let names: Vec<&str> = schemas.iter().map(|t| t["name"].as_str().expect("name")).collect();
        assert_eq!(names, super::super::names::ALL);
    }

    #[test]
    fn task_content_is_yuxis_form_for_every_outcome() {
        assert_eq!(
            task_content("t_sub_x_1", TaskOutcome::Completed(Some("42"))),
            "> 子智能体线程 ID: t_sub_x_1\n\n---\n\n42"
        );
        assert!(task_content("t", TaskOutcome::Completed(None)).ends_with("completed without a text answer."));
        assert!(task_content("t", TaskOutcome::Ended(RunStatus::Failed, Some("boom"))).ends_with("ended failed: boom"));
        assert!(task_content("t", TaskOutcome::StillRunning("r-1")).contains("run_id r-1"));
    }
}
