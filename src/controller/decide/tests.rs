//! (Over 500 lines: one case per transition of one state machine, kept beside each other.)
//! `decide`, case by case: every transition of the run lifecycle and the races around them.

use serde_json::json;

use super::*;

const T0: &str = "2026-11-30T10:00:00Z";

fn at(seconds: i64) -> jiff::Timestamp {
    T0.parse::<jiff::Timestamp>().expect("time") + jiff::SignedDuration::from_secs(seconds)
}

/// A run created at T0, with `spec` merged over a plain spec and `status` as its status.
fn run(spec: serde_json::Value, status: serde_json::Value) -> AgentRun {
    let mut base = json!({"agent": "research-explorer", "input": "look", "uid": "alice", "threadId": "t1"});
    base.as_object_mut().expect("object").extend(spec.as_object().expect("object").clone());
    serde_json::from_value(json!({
        "apiVersion": "yuxi.dev/v1alpha1", "kind": "AgentRun",
        "metadata": {"name": "r1", "namespace": "team-a", "uid": "u-1", "creationTimestamp": T0},
        "spec": base, "status": status,
    }))
    .expect("an AgentRun")
}

fn agent() -> Agent {
    serde_json::from_value(json!({"apiVersion": "yuxi.dev/v1alpha1", "kind": "Agent",
        "metadata": {"name": "research-explorer", "namespace": "team-a"},
        "spec": {"backend": "SubAgentBackend", "isSubagent": true}}))
    .expect("an Agent")
}

fn pod(phase: PodPhase) -> ObservedPod {
    ObservedPod { phase, deleting: false, reason: None, message: None, runner: None, waiting: None }
}

fn outcome(status: &str, output: Option<&str>, error: Option<&str>) -> Outcome {
    Outcome {
        status: serde_json::from_value(serde_json::Value::from(status)).expect("a run status"),
        output: output.map(String::from),
        error: error.map(String::from),
        token_usage: None,
        reason: None,
        tree_token_usage: None,
        tree_cost: Vec::new(),
    }
}

fn decide_at(run: &AgentRun, pod: Option<ObservedPod>, outcome: Option<Outcome>, now: i64) -> Vec<Action> {
    let agent = agent();
    let observed = Observed {
        run,
        pod,
        agent: Some(&agent),
        model: None,
        outcome,
        quota: None,
        recorded: None,
        traces: None,
        mcp_servers: Default::default(),
        now: at(now),
    };
    decide(&observed, &Settings::default())
}

/// The status the actions set (there is at most one).
fn status_of(actions: &[Action]) -> AgentRunStatus {
    let set: Vec<&AgentRunStatus> = actions
        .iter()
        .filter_map(|a| match a {
            Action::SetStatus(s) => Some(s.as_ref()),
            _ => None,
        })
        .collect();
    assert_eq!(set.len(), 1, "one status in {actions:?}");
    set[0].clone()
}

fn phase_reason(actions: &[Action]) -> (AgentRunPhase, String) {
    let status = status_of(actions);
    (status.phase.expect("a phase"), status.reason.expect("a reason"))
}

fn has(actions: &[Action], wanted: impl Fn(&Action) -> bool) -> bool {
    actions.iter().any(wanted)
}

fn creates_pod(actions: &[Action]) -> bool {
    has(actions, |a| matches!(a, Action::CreatePod(_)))
}

fn deletes_pod(actions: &[Action]) -> bool {
    has(actions, |a| matches!(a, Action::DeletePod))
}

fn records(actions: &[Action]) -> Option<RunStatus> {
    actions.iter().find_map(|a| match a {
        Action::RecordStatus(s, _) => Some(*s),
        _ => None,
    })
}

fn condition<'a>(status: &'a AgentRunStatus, type_: &str) -> &'a Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("condition {type_}"))
}

/// A run that has been started: pod named, phase `phase`, started at T0.
fn started(phase: &str, spec: serde_json::Value) -> AgentRun {
    run(spec, json!({"phase": phase, "podName": "r1", "attempts": 1, "startTime": T0}))
}

#[test]
fn a_new_run_gets_its_pod_once_and_is_pending() {
    let fresh = run(json!({}), json!(null));
    let actions = decide_at(&fresh, None, None, 1);
    assert!(creates_pod(&actions));
    let status = status_of(&actions);
    assert_eq!(
        (status.phase, status.pod_name.as_deref(), status.attempts),
        (Some(AgentRunPhase::Pending), Some("r1"), Some(1))
    );
    assert_eq!(condition(&status, SUCCEEDED).status, "Unknown");
    assert!(has(&actions, |a| matches!(a, Action::Event { reason, .. } if reason == "PodCreated")));
}

#[test]
fn the_status_and_its_conditions_carry_the_generation_they_were_computed_for() {
    let mut fresh = run(json!({}), json!(null));
    fresh.metadata.generation = Some(1);
    let status = status_of(&decide_at(&fresh, None, None, 1));
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!(condition(&status, SUCCEEDED).observed_generation, Some(1));
    // A cancel is a change of the spec: the next status is for the new generation.
    let mut cancelled = run(json!({"cancel": true}), serde_json::to_value(&status).expect("json"));
    cancelled.metadata.generation = Some(2);
    let status = status_of(&decide_at(&cancelled, None, None, 2));
    assert_eq!(status.observed_generation, Some(2));
    assert_eq!(condition(&status, SUCCEEDED).observed_generation, Some(2));
}

#[test]
fn reconciling_again_before_the_pod_is_seen_asks_for_the_same_pod_without_a_second_attempt() {
    let first = decide_at(&run(json!({}), json!(null)), None, None, 1);
    let after = run(json!({}), serde_json::to_value(status_of(&first)).expect("json"));
    let again = decide_at(&after, None, None, 2);
    let name = |actions: &[Action]| {
        actions.iter().find_map(|a| match a {
            Action::CreatePod(objects) => objects.pod.metadata.name.clone(),
            _ => None,
        })
    };
    assert_eq!(name(&again), name(&first), "the same deterministic pod");
    assert_eq!(status_of(&again).attempts, Some(1));
    assert!(!has(&again, |a| matches!(a, Action::Event { .. })), "no second event: {again:?}");
}

#[test]
fn a_pod_already_there_is_not_created_again() {
    let pending = run(json!({}), json!({"phase": "Pending", "podName": "r1", "attempts": 1}));
    let actions = decide_at(&pending, Some(pod(PodPhase::Pending)), None, 1);
    assert!(!creates_pod(&actions));
    assert_eq!(status_of(&actions).phase, Some(AgentRunPhase::Pending));
}

#[test]
fn a_pod_that_waits_on_its_image_says_so() {
    let pending = run(json!({}), json!({"phase": "Pending", "podName": "r1"}));
    let mut waiting = pod(PodPhase::Pending);
    waiting.waiting = Some("ImagePullBackOff".into());
    let status = status_of(&decide_at(&pending, Some(waiting), None, 1));
    assert_eq!(status.reason.as_deref(), Some("ImagePullBackOff"));
}

#[test]
fn a_running_pod_makes_the_run_running_from_now() {
    let pending = run(json!({}), json!({"phase": "Pending", "podName": "r1", "attempts": 1}));
    let actions = decide_at(&pending, Some(pod(PodPhase::Running)), None, 7);
    let status = status_of(&actions);
    assert_eq!((status.phase, status.start_time.map(|t| t.0)), (Some(AgentRunPhase::Running), Some(at(7))));
    assert_eq!(records(&actions), Some(RunStatus::Running));
    assert!(has(&actions, |a| matches!(a, Action::Event { reason, warning: false, .. } if reason == "Started")));
    // Still running: nothing new to record.
    let running = started("Running", json!({}));
    assert_eq!(records(&decide_at(&running, Some(pod(PodPhase::Running)), None, 8)), None);
}

#[test]
fn a_succeeded_pod_ends_the_run_as_its_result_says() {
    let running = started("Running", json!({}));
    let long = "x".repeat(RESULT_MAX_CHARS + 10);
    let actions =
        decide_at(&running, Some(pod(PodPhase::Succeeded)), Some(outcome("completed", Some(&long), None)), 60);
    let status = status_of(&actions);
    assert_eq!((status.phase, status.reason.as_deref()), (Some(AgentRunPhase::Completed), Some("Completed")));
    assert_eq!(status.result.map(|r| r.chars().count()), Some(RESULT_MAX_CHARS));
    assert_eq!(status.completion_time.map(|t| t.0), Some(at(60)));
    assert_eq!(condition(&status_of(&actions), SUCCEEDED).status, "True");
    assert_eq!(records(&actions), Some(RunStatus::Completed));
    assert!(has(&actions, |a| matches!(a, Action::CancelChildren)), "an ended parent leaves no child running");

    let cancelled = decide_at(&running, Some(pod(PodPhase::Succeeded)), Some(outcome("cancelled", None, None)), 60);
    assert_eq!(phase_reason(&cancelled), (AgentRunPhase::Cancelled, "Cancelled".into()));
    let missing = decide_at(&running, Some(pod(PodPhase::Succeeded)), None, 60);
    assert_eq!(phase_reason(&missing), (AgentRunPhase::Failed, "ResultMissing".into()));
}

#[test]
fn a_failed_pod_ends_the_run_with_the_pods_reason() {
    let running = started("Running", json!({}));
    let mut oom = pod(PodPhase::Failed);
    oom.runner = Some(Termination { reason: "OOMKilled".into(), exit_code: 137 });
    assert_eq!(phase_reason(&decide_at(&running, Some(oom), None, 5)), (AgentRunPhase::Failed, "OOMKilled".into()));

    let mut evicted = pod(PodPhase::Failed);
    evicted.reason = Some("Evicted".into());
    evicted.message = Some("The node was low on resource: memory.".into());
    let actions = decide_at(&running, Some(evicted), None, 5);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Interrupted, "Evicted".into()));
    assert_eq!(records(&actions), Some(RunStatus::Interrupted));
    assert!(has(&actions, |a| matches!(a, Action::Event { warning: true, .. })));

    let mut deadline = pod(PodPhase::Failed);
    deadline.reason = Some("DeadlineExceeded".into());
    assert_eq!(
        phase_reason(&decide_at(&running, Some(deadline), None, 5)),
        (AgentRunPhase::Failed, "DeadlineExceeded".into())
    );

    let mut exited = pod(PodPhase::Failed);
    exited.runner = Some(Termination { reason: "Error".into(), exit_code: 1 });
    let failed = decide_at(&running, Some(exited.clone()), Some(outcome("failed", None, Some("model unreachable"))), 5);
    assert_eq!(phase_reason(&failed), (AgentRunPhase::Failed, "RunnerFailed".into()));
    assert_eq!(status_of(&failed).message.as_deref(), Some("model unreachable"));
    let unexplained = decide_at(&running, Some(exited), None, 5);
    assert_eq!(status_of(&unexplained).message.as_deref(), Some("the runner exited with code 1"));
}

#[test]
fn a_pod_that_vanished_under_a_running_run_interrupts_it_unless_the_run_had_finished() {
    let running = started("Running", json!({}));
    let actions = decide_at(&running, None, None, 5);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Interrupted, "PodDeleted".into()));
    assert!(!creates_pod(&actions), "a run is never run twice");
    let finished = decide_at(&running, None, Some(outcome("completed", Some("done"), None)), 5);
    assert_eq!(phase_reason(&finished), (AgentRunPhase::Completed, "Completed".into()));
}

#[test]
fn a_pod_being_deleted_is_looked_at_again_later() {
    let running = started("Running", json!({}));
    let mut going = pod(PodPhase::Running);
    going.deleting = true;
    assert_eq!(decide_at(&running, Some(going), None, 5), vec![Action::RequeueAfter(Duration::from_secs(5))]);
}

#[test]
fn a_missing_agent_fails_the_run_and_stops_its_pod() {
    let running = started("Running", json!({}));
    let observed = Observed {
        run: &running,
        pod: Some(pod(PodPhase::Running)),
        agent: None,
        model: None,
        outcome: None,
        quota: None,
        recorded: None,
        traces: None,
        mcp_servers: Default::default(),
        now: at(5),
    };
    let actions = decide(&observed, &Settings::default());
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Failed, "AgentNotFound".into()));
    assert!(deletes_pod(&actions));
    assert!(status_of(&actions).message.expect("message").contains("\"research-explorer\""));
}

#[test]
fn a_run_cancelled_before_it_started_ends_at_once() {
    let fresh = run(json!({"cancel": true}), json!(null));
    let actions = decide_at(&fresh, None, None, 1);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Cancelled, "Cancelled".into()));
    assert!(!creates_pod(&actions) && !has(&actions, |a| matches!(a, Action::SignalCancel)));
    assert_eq!(records(&actions), Some(RunStatus::Cancelled));
}

#[test]
fn a_running_run_is_signalled_then_its_pod_deleted_after_the_grace_period() {
    let asked = started("Running", json!({"cancel": true}));
    let actions = decide_at(&asked, Some(pod(PodPhase::Running)), None, 10);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::CancelRequested, "CancelRequested".into()));
    assert!(has(&actions, |a| matches!(a, Action::SignalCancel)));
    assert_eq!(records(&actions), Some(RunStatus::CancelRequested));
    assert_eq!(actions.last(), Some(&Action::RequeueAfter(Duration::from_secs(30))));
    assert!(!deletes_pod(&actions));

    let requested = run(json!({"cancel": true}), serde_json::to_value(status_of(&actions)).expect("json"));
    let waiting = decide_at(&requested, Some(pod(PodPhase::Running)), None, 25);
    assert_eq!(waiting, vec![Action::RequeueAfter(Duration::from_secs(15))], "within the grace period");
    let overdue = decide_at(&requested, Some(pod(PodPhase::Running)), None, 41);
    assert!(deletes_pod(&overdue));
    assert_eq!(phase_reason(&overdue), (AgentRunPhase::Cancelled, "Cancelled".into()));
    let stopped = decide_at(&requested, Some(pod(PodPhase::Succeeded)), Some(outcome("cancelled", None, None)), 20);
    assert_eq!(phase_reason(&stopped), (AgentRunPhase::Cancelled, "Cancelled".into()));
    assert!(!deletes_pod(&stopped), "the pod has ended by itself");
}

#[test]
fn a_run_that_completes_while_its_cancel_is_on_the_way_keeps_its_answer() {
    let requested = started("CancelRequested", json!({"cancel": true}));
    let actions =
        decide_at(&requested, Some(pod(PodPhase::Succeeded)), Some(outcome("completed", Some("42"), None)), 12);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Completed, "Completed".into()));
}

#[test]
fn a_cancel_during_pod_creation_ends_the_run_and_the_late_pod_is_deleted() {
    // The pod was asked for, the cache has not shown it yet, and the cancel arrives.
    let creating = run(json!({"cancel": true}), json!({"phase": "Pending", "podName": "r1", "attempts": 1}));
    let actions = decide_at(&creating, None, None, 2);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Cancelled, "Cancelled".into()));
    assert!(!creates_pod(&actions));
    // The pod shows up once the run has ended: it is deleted.
    let ended = run(json!({"cancel": true}), serde_json::to_value(status_of(&actions)).expect("json"));
    assert_eq!(decide_at(&ended, Some(pod(PodPhase::Pending)), None, 3), vec![Action::DeletePod]);
}

#[test]
fn a_run_past_its_deadline_fails_and_its_pod_is_deleted() {
    let running = started("Running", json!({"timeoutSeconds": 60}));
    assert_eq!(records(&decide_at(&running, Some(pod(PodPhase::Running)), None, 59)), None, "still in time");
    let actions = decide_at(&running, Some(pod(PodPhase::Running)), None, 61);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Failed, "DeadlineExceeded".into()));
    assert!(deletes_pod(&actions));
    // A run that never started counts from its creation.
    let stuck = run(json!({"timeoutSeconds": 60}), json!({"phase": "Pending", "podName": "r1"}));
    assert_eq!(phase_reason(&decide_at(&stuck, Some(pod(PodPhase::Pending)), None, 61)).1, "DeadlineExceeded");
}

#[test]
fn a_deadline_passing_during_a_cancel_still_ends_the_run_cancelled() {
    let asked = started("Running", json!({"cancel": true, "timeoutSeconds": 60}));
    let actions = decide_at(&asked, Some(pod(PodPhase::Running)), None, 120);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::CancelRequested, "CancelRequested".into()));
    let requested =
        run(json!({"cancel": true, "timeoutSeconds": 60}), serde_json::to_value(status_of(&actions)).expect("json"));
    let overdue = decide_at(&requested, Some(pod(PodPhase::Running)), None, 151);
    assert_eq!(phase_reason(&overdue), (AgentRunPhase::Cancelled, "Cancelled".into()));
}

#[test]
fn finished_runs_are_deleted_after_their_time_to_live() {
    let done = run(json!({"ttlSecondsAfterFinished": 100}), json!({"phase": "Completed", "completionTime": T0}));
    assert_eq!(decide_at(&done, None, None, 40), vec![Action::RequeueAfter(Duration::from_secs(60))]);
    assert_eq!(decide_at(&done, None, None, 100), vec![Action::DeleteRun]);
    let kept = run(json!({}), json!({"phase": "Failed", "completionTime": T0}));
    assert_eq!(decide_at(&kept, None, None, 100_000), Vec::<Action>::new());
}

#[test]
fn a_run_being_deleted_is_left_alone() {
    let mut going = started("Running", json!({}));
    going.metadata.deletion_timestamp = Some(Time(at(1)));
    assert_eq!(decide_at(&going, None, None, 2), Vec::<Action>::new());
}

#[test]
fn a_run_whose_pod_cannot_be_built_fails_naming_the_field() {
    let bad = run(json!({"uid": "../bob"}), json!(null));
    let actions = decide_at(&bad, None, None, 1);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Failed, "InvalidSpec".into()));
    assert!(status_of(&actions).message.expect("message").contains("spec.uid"));
    assert!(!creates_pod(&actions));
}

#[test]
fn a_conditions_transition_time_moves_only_when_its_status_does() {
    let mut conditions = Vec::new();
    set_condition(&mut conditions, SUCCEEDED, "Unknown", "Pending", "not started", at(1));
    set_condition(&mut conditions, SUCCEEDED, "Unknown", "Running", "running", at(5));
    assert_eq!(
        (conditions.len(), conditions[0].last_transition_time.0, conditions[0].reason.as_str()),
        (1, at(1), "Running")
    );
    set_condition(&mut conditions, SUCCEEDED, "True", "Completed", "done", at(9));
    assert_eq!(conditions[0].last_transition_time.0, at(9));
}

#[test]
fn a_run_past_a_daily_quota_gets_no_pod_and_fails_naming_the_quota() {
    let fresh = run(json!({}), json!(null));
    let agent = agent();
    let used_up = crate::run::budget::QuotaUsedUp { limit: "max_tokens_per_user_per_day", quota: 1000, used: 1200 };
    let observed = Observed {
        run: &fresh,
        pod: None,
        agent: Some(&agent),
        model: None,
        outcome: None,
        quota: Some(used_up),
        recorded: None,
        traces: None,
        mcp_servers: Default::default(),
        now: at(1),
    };
    let actions = decide(&observed, &Settings::default());
    assert!(!creates_pod(&actions));
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Failed, "QuotaExceeded".into()));
    assert!(status_of(&actions).message.expect("message").contains("max_tokens_per_user_per_day 1000"));
    // A run whose pod was made already is not stopped by a quota used up since.
    let made = run(json!({}), json!({"phase": "Pending", "podName": "r1", "attempts": 1}));
    let observed = Observed { run: &made, ..observed };
    assert!(creates_pod(&decide(&observed, &Settings::default())));
}

#[test]
fn a_run_stopped_by_its_budget_says_so_and_its_root_shows_the_trees_usage() {
    let running = started("Running", json!({"budget": {"maxTokens": 100}}));
    let mut stopped = outcome("failed", Some(""), Some("the run tree used 120 tokens of its budget of 100"));
    stopped.reason = Some("BudgetExceeded".into());
    stopped.tree_token_usage =
        Some(TokenUsage { prompt_tokens: 90, completion_tokens: 30, total_tokens: 120, cached_prompt_tokens: 0 });
    let actions = decide_at(&running, Some(pod(PodPhase::Succeeded)), Some(stopped), 5);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Failed, "BudgetExceeded".into()));
    assert_eq!(status_of(&actions).tree_token_usage.map(|u| u.total_tokens), Some(120));
}

fn recorded(status: &str, waiting: bool) -> crate::run::RunRecord {
    let waiting = waiting.then(|| {
        json!({"reason": "ApprovalRequired", "expires_at": "2026-12-04T10:00:00Z", "action_requests": [
            {"tool_call_id": "call_0_0", "name": "write_file", "arguments": {}, "allowed_decisions": ["approve"], "description": ""}]})
    });
    serde_json::from_value(json!({"run_id": "r1", "thread_id": "t1", "agent_slug": "research-explorer", "uid": "alice",
        "parent": null, "status": status, "error": null, "created_at": T0, "waiting": waiting}))
    .expect("a record")
}

fn decide_waiting(run: &AgentRun, pod: Option<ObservedPod>, record: crate::run::RunRecord, now: i64) -> Vec<Action> {
    let agent = agent();
    let observed = Observed {
        run,
        pod,
        agent: Some(&agent),
        model: None,
        outcome: None,
        quota: None,
        recorded: Some(record),
        traces: None,
        mcp_servers: Default::default(),
        now: at(now),
    };
    decide(&observed, &Settings::default())
}

#[test]
fn a_run_paused_for_approval_waits_without_its_pod_or_its_deadline() {
    // The runner paused the run and its pod ended: Waiting, ApprovalRequired, the calls named, the pod gone.
    let running = started("Running", json!({"timeoutSeconds": 60}));
    let actions = decide_waiting(&running, Some(pod(PodPhase::Succeeded)), recorded("waiting", true), 30);
    assert_eq!(phase_reason(&actions), (AgentRunPhase::Waiting, "ApprovalRequired".into()));
    assert!(deletes_pod(&actions));
    let status = status_of(&actions);
    let pending = status.pending_approval.expect("the calls waiting");
    assert_eq!(
        (pending.tool_calls[0].name.as_str(), pending.expires_at.as_str()),
        ("write_file", "2026-12-04T10:00:00Z")
    );
    assert_eq!(condition(&status_of(&actions), "ApprovalRequired").status, "True");
    // Long past its deadline it still waits, with no pod: nothing happens.
    let waiting = run(json!({"timeoutSeconds": 60}), serde_json::to_value(status_of(&actions)).expect("status"));
    let later = decide_waiting(&waiting, None, recorded("waiting", true), 100_000);
    assert!(later.is_empty(), "{later:?}");
}

#[test]
fn a_resumed_run_gets_a_new_pod_with_its_waiting_time_taken_off_its_clock() {
    let running = started("Running", json!({"timeoutSeconds": 60}));
    let paused = status_of(&decide_waiting(&running, Some(pod(PodPhase::Succeeded)), recorded("waiting", true), 30));
    let waiting = run(json!({"timeoutSeconds": 60}), serde_json::to_value(&paused).expect("status"));
    // Resumed 1000 s later: a new pod; it had run 30 s, so its deadline is 30 s away, not past.
    let actions = decide_waiting(&waiting, None, recorded("pending", false), 1030);
    assert!(creates_pod(&actions), "{actions:?}");
    let status = status_of(&actions);
    assert_eq!((status.phase, status.attempts), (Some(AgentRunPhase::Pending), Some(2)));
    assert_eq!(status.start_time.clone().map(|t| t.0), Some(at(1000)));
    assert_eq!(condition(&status, "ApprovalRequired").status, "False");
    assert!(status.pending_approval.is_none());
    // A run ended while it waited (a time-out) ends as the store says.
    let mut timed_out = recorded("failed", false);
    timed_out.error = Some("no decision came before the approval's time-out".into());
    let agent = agent();
    let mut outcome = outcome("failed", Some(""), timed_out.error.as_deref());
    outcome.reason = Some("ApprovalTimeout".into());
    let observed = Observed {
        run: &waiting,
        pod: None,
        agent: Some(&agent),
        model: None,
        outcome: Some(outcome),
        quota: None,
        recorded: Some(timed_out),
        traces: None,
        mcp_servers: Default::default(),
        now: at(90_000),
    };
    assert_eq!(
        phase_reason(&decide(&observed, &Settings::default())),
        (AgentRunPhase::Failed, "ApprovalTimeout".into())
    );
}
