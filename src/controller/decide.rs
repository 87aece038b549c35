//! (Over 500 lines: one state machine, kept whole so every transition reads in one place; its tests are in `decide/tests.rs`.)
//! The AgentRun state machine, pure: from the run, its observed sandbox pod, whether its Agent exists,
//! the result the runner stored, the clock and the settings, [`decide`] returns what to do next. The
//! reconciler only gathers the inputs and applies the actions; `docs/run-lifecycle.md` draws the same
//! machine.
//!
//! Phases (docs/concepts/agents.md): `Pending` → `Running` → `Completed` | `Failed`; `spec.cancel` →
//! `CancelRequested` → `Cancelled`; a pod that goes away, is evicted or is killed under a running run →
//! `Interrupted` or `Failed` with the pod's reason; a run past its deadline → `Failed`
//! (`DeadlineExceeded`); a run whose Agent is missing → `Failed` (`AgentNotFound`). Terminal runs are
//! deleted `ttlSecondsAfterFinished` after they finished.
//!
//! Idempotent: the pod's name is derived from the run's ([`super::pod::pod_name`]), so deciding twice
//! never asks for a second pod, and the reconciler takes "already exists" as done.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use super::pod::{SandboxObjects, SandboxSettings, sandbox_objects_on};
use crate::resources::names::pod_name;
use crate::resources::{Agent, AgentRun, AgentRunPhase, AgentRunStatus, TokenUsage};
use crate::run::{RunResult, RunStatus};

/// How much of the final text the status keeps, in characters.
pub const RESULT_MAX_CHARS: usize = 32_768;
/// The condition that says whether the run succeeded: `Unknown` until it ends (Tekton's convention).
pub const SUCCEEDED: &str = "Succeeded";
/// The condition set when a cancel is asked for; its `lastTransitionTime` starts the grace period.
pub const CANCEL_REQUESTED: &str = "CancelRequested";

/// The Model resource `run` of `agent` runs on: the first model set of the run's `spec.model`, the
/// Agent's `context.model` and the sandbox settings' default, when it is a Model's name
/// ([`crate::resources::model::resource_name`]) rather than `<provider>/<model>`.
pub fn model_name<'a>(run: &'a AgentRun, agent: &'a Agent, sandbox: &'a SandboxSettings) -> Option<&'a str> {
    let context_model = agent.spec.context.as_ref().and_then(|c| c.model.as_deref());
    crate::resources::model::effective(run.spec.model.as_deref(), context_model, sandbox.default_model.as_deref())
        .and_then(crate::resources::model::resource_name)
}

/// What the state machine needs besides its inputs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// How long a running run may take to stop after a cancel before its pod is deleted.
    pub cancel_grace: Duration,
    /// How long to wait before looking again at a pod being deleted, or in an unknown phase.
    pub recheck: Duration,
    /// The sandbox pods' settings.
    pub sandbox: SandboxSettings,
    /// The daily token quotas a run is checked against before its pod is made.
    pub quotas: crate::run::budget::DailyQuotas,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            cancel_grace: Duration::from_secs(30),
            recheck: Duration::from_secs(5),
            sandbox: SandboxSettings::default(),
            quotas: Default::default(),
        }
    }
}

/// The phase of a pod, as `status.phase` spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodPhase {
    /// Accepted, containers not all started.
    Pending,
    /// Started.
    Running,
    /// Every container ended with exit code 0.
    Succeeded,
    /// A container failed, or the pod was stopped (eviction, deadline).
    Failed,
    /// The node cannot say.
    Unknown,
}

/// How a container ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Termination {
    /// `Completed`, `Error`, `OOMKilled`...
    pub reason: String,
    /// The exit code.
    pub exit_code: i32,
}

/// What the state machine reads of the run's pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedPod {
    /// Its phase.
    pub phase: PodPhase,
    /// Whether it is being deleted.
    pub deleting: bool,
    /// `status.reason`: `Evicted`, `DeadlineExceeded`...
    pub reason: Option<String>,
    /// `status.message`.
    pub message: Option<String>,
    /// How the `runner` container ended, when it has.
    pub runner: Option<Termination>,
    /// Why a container waits (`ImagePullBackOff`, `CreateContainerConfigError`...), while pending.
    pub waiting: Option<String>,
}

impl ObservedPod {
    /// The parts of `pod` the state machine reads.
    pub fn from_pod(pod: &Pod) -> Self {
        let status = pod.status.clone().unwrap_or_default();
        let phase = match status.phase.as_deref() {
            Some("Pending") | None => PodPhase::Pending,
            Some("Running") => PodPhase::Running,
            Some("Succeeded") => PodPhase::Succeeded,
            Some("Failed") => PodPhase::Failed,
            Some(_) => PodPhase::Unknown,
        };
        let containers = status.container_statuses.unwrap_or_default();
        let runner = containers
            .iter()
            .find(|c| c.name == "runner")
            .and_then(|c| c.state.as_ref()?.terminated.as_ref())
            .map(|t| Termination { reason: t.reason.clone().unwrap_or_default(), exit_code: t.exit_code });
        let waiting = containers.iter().find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone());
        ObservedPod {
            phase,
            deleting: pod.metadata.deletion_timestamp.is_some(),
            reason: status.reason,
            message: status.message,
            runner,
            waiting,
        }
    }

    fn ended(&self) -> bool {
        matches!(self.phase, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// The result the runner stored (`{status, output, error, token_usage}` of the run's result key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// `completed`, `failed` or `cancelled`.
    pub status: RunStatus,
    /// The final text.
    pub output: Option<String>,
    /// Why it failed.
    pub error: Option<String>,
    /// Tokens used.
    pub token_usage: Option<TokenUsage>,
    /// Why a rule ended it (`BudgetExceeded`).
    pub reason: Option<String>,
    /// On a tree's root: the tokens the whole tree used.
    pub tree_token_usage: Option<TokenUsage>,
    /// On a tree's root: what the whole tree cost, by currency.
    pub tree_cost: Vec<crate::resources::CostAmount>,
}

impl Outcome {
    /// The outcome of a stored result.
    pub fn from_result(result: &RunResult) -> Self {
        Outcome {
            status: result.status,
            output: Some(result.output.clone()),
            error: result.error.clone(),
            token_usage: Some(result.token_usage.clone()),
            reason: result.reason.clone(),
            tree_token_usage: result.tree_token_usage.clone(),
            tree_cost: result.tree_cost.clone(),
        }
    }
}

/// Everything [`decide`] looks at.
#[derive(Clone, Debug)]
pub struct Observed<'a> {
    /// The run.
    pub run: &'a AgentRun,
    /// Its pod, when there is one.
    pub pod: Option<ObservedPod>,
    /// Its Agent, when it exists.
    pub agent: Option<&'a Agent>,
    /// The Model resource it runs on ([`model_name`]), when it runs on one and that Model exists.
    pub model: Option<&'a crate::resources::Model>,
    /// What the runner stored, when it has finished.
    pub outcome: Option<Outcome>,
    /// A daily token quota of the run's user or namespace that is used up, when the run has no pod yet
    /// (the reconciler reads the counts only then).
    pub quota: Option<crate::run::budget::QuotaUsedUp>,
    /// The run as the store records it, when it does (a run the facade started): whether it waits for
    /// a person, or was resumed.
    pub recorded: Option<crate::run::RunRecord>,
    /// The namespace's own trace export (its `yuxi-traces` ConfigMap,
    /// [`crate::controller::pod::namespace_traces`]), in place of the installation's; read only for a
    /// run whose pod is to be made. An export with an empty endpoint exports nothing.
    pub traces: Option<crate::controller::pod::TraceExport>,
    /// The namespace's McpServers the agent names that the installation's configuration does not, as
    /// the runner reads them; read only for a run whose pod is to be made.
    pub mcp_servers: crate::run::inputs::McpServers,
    /// Now.
    pub now: jiff::Timestamp,
}

/// One thing for the reconciler to do. Actions come in the order they are to be applied.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Create the run's inputs Secret and its pod (an existing one of the same name is fine).
    CreatePod(Box<SandboxObjects>),
    /// Delete the run's pod (a missing one is fine).
    DeletePod,
    /// Ask the runner to stop (the run's cancel key and notice in Redis).
    SignalCancel,
    /// Apply this status (server-side apply of the status subresource).
    SetStatus(Box<AgentRunStatus>),
    /// Mirror the phase into the run's record in Redis, which the facade serves.
    RecordStatus(RunStatus, Option<String>),
    /// Cancel the unfinished runs this run started.
    CancelChildren,
    /// Delete the run's credentials Secret, if it has one (its token is refused from the run's end on;
    /// this removes the token itself).
    DeleteCredentials,
    /// Delete the run itself (its time to live after finishing is over).
    DeleteRun,
    /// Publish a Kubernetes Event on the run.
    Event {
        /// `Warning` rather than `Normal`.
        warning: bool,
        /// A CamelCase reason.
        reason: String,
        /// What happened.
        note: String,
    },
    /// Look again after this long.
    RequeueAfter(Duration),
}

/// The next actions for a run (see the module).
pub fn decide(observed: &Observed<'_>, settings: &Settings) -> Vec<Action> {
    let run = observed.run;
    let status = run.status.clone().unwrap_or_default();
    let phase = status.phase.unwrap_or(AgentRunPhase::Pending);
    let now = observed.now;
    let pod = observed.pod.as_ref();
    let pod_alive = pod.is_some_and(|p| !p.ended() && !p.deleting);
    if run.metadata.deletion_timestamp.is_some() {
        return Vec::new();
    }

    if phase.is_terminal() {
        let mut actions = Vec::new();
        if pod_alive {
            actions.push(Action::DeletePod);
        }
        if let Some(ttl) = run.spec.ttl_seconds_after_finished {
            let finished = status.completion_time.as_ref().map_or(now, |t| t.0);
            let expires = finished + jiff::SignedDuration::from_secs(ttl.max(0));
            match until(now, expires) {
                None => actions.push(Action::DeleteRun),
                Some(wait) => actions.push(Action::RequeueAfter(wait)),
            }
        }
        return actions;
    }

    // Kubernetes' convention: the status says which generation of the spec it was computed for.
    let status = AgentRunStatus { observed_generation: run.metadata.generation, ..status };
    let mut next = Transition { status, now, actions: Vec::new() };
    if pod_alive && observed.agent.is_none() {
        next.actions.push(Action::DeletePod);
    }
    let Some(agent) = observed.agent else {
        return next.finish(
            AgentRunPhase::Failed,
            "AgentNotFound",
            format!("agent {:?} does not exist in namespace {}", run.spec.agent, run.namespace().unwrap_or_default()),
        );
    };

    // A cancel comes before everything else, a deadline passing during it included: the user asked.
    if run.spec.is_cancel_requested() {
        return cancel(next, observed, settings);
    }

    // A run waiting for a person runs nowhere, and its deadline does not run.
    if let Some(actions) = waiting(&mut next, observed, phase, settings) {
        return actions;
    }

    let timeout = run.spec.timeout_seconds.map_or(crate::run::inputs::DEFAULT_TIMEOUT_SECONDS as i64, |t| t.max(1));
    let started =
        next.status.start_time.as_ref().map(|t| t.0).or(run.metadata.creation_timestamp.as_ref().map(|t| t.0));
    if let Some(started) = started
        && until(now, started + jiff::SignedDuration::from_secs(timeout)).is_none()
    {
        if pod_alive {
            next.actions.push(Action::DeletePod);
        }
        if let Some(outcome) = &observed.outcome {
            return next.end_as_reported(outcome);
        }
        return next.finish(AgentRunPhase::Failed, "DeadlineExceeded", format!("the run took longer than {timeout} s"));
    }

    match pod {
        None if phase == AgentRunPhase::Running => match &observed.outcome {
            Some(outcome) => next.end_as_reported(outcome),
            None => {
                let name = next.status.pod_name.clone().unwrap_or_else(|| pod_name(run));
                next.finish(
                    AgentRunPhase::Interrupted,
                    "PodDeleted",
                    format!("the sandbox pod {name} went away while the run was running"),
                )
            }
        },
        // A run not started yet whose user or namespace has used its tokens for the day does not start.
        None if next.status.pod_name.is_none() && observed.quota.is_some() => {
            let used_up = observed.quota.as_ref().expect("checked");
            next.finish(AgentRunPhase::Failed, crate::run::budget::QUOTA_EXCEEDED, used_up.message())
        }
        None if model_name(run, agent, &settings.sandbox)
            .is_some_and(|name| observed.model.is_none_or(|model| model.metadata.name.as_deref() != Some(name))) =>
        {
            let name = model_name(run, agent, &settings.sandbox).unwrap_or_default();
            next.finish(
                AgentRunPhase::Failed,
                "ModelNotFound",
                format!("model {name:?} does not exist in namespace {}", run.namespace().unwrap_or_default()),
            )
        }
        None => match sandbox_objects_on(run, agent, observed.model, &namespace_sandbox(observed, &settings.sandbox)) {
            Err(err) => next.finish(AgentRunPhase::Failed, "InvalidSpec", err.to_string()),
            Ok(objects) => {
                // A pod named already but not seen yet is created again (the cache may lag behind the
                // creation; the name makes it the same pod), without counting another attempt.
                let first = next.status.pod_name.is_none();
                next.actions.push(Action::CreatePod(Box::new(objects)));
                next.status.phase = Some(AgentRunPhase::Pending);
                next.status.pod_name = Some(pod_name(run));
                if first {
                    next.status.attempts = Some(next.status.attempts.unwrap_or(0) + 1);
                    next.status.reason = Some("PodCreated".into());
                    next.status.message = Some(format!("sandbox pod {} created", pod_name(run)));
                    set_condition(
                        &mut next.status.conditions,
                        SUCCEEDED,
                        "Unknown",
                        "Pending",
                        "the run has not started",
                        now,
                    );
                    next.actions.push(Action::Event {
                        warning: false,
                        reason: "PodCreated".into(),
                        note: format!("created sandbox pod {}", pod_name(run)),
                    });
                }
                next.set()
            }
        },
        Some(pod) if pod.deleting && !pod.ended() => next.wait(settings.recheck),
        Some(pod) => match pod.phase {
            PodPhase::Pending => {
                next.status.pod_name.get_or_insert_with(|| pod_name(run));
                next.status.phase = Some(AgentRunPhase::Pending);
                if let Some(waiting) = &pod.waiting {
                    next.status.reason = Some(waiting.clone());
                    next.status.message = Some(format!("the sandbox pod waits: {waiting}"));
                }
                next.set()
            }
            PodPhase::Running => {
                if phase == AgentRunPhase::Pending {
                    next.status.phase = Some(AgentRunPhase::Running);
                    next.status.start_time.get_or_insert(Time(now));
                    next.status.reason = Some("Running".into());
                    next.status.message = Some("the runner is executing the run".into());
                    set_condition(
                        &mut next.status.conditions,
                        SUCCEEDED,
                        "Unknown",
                        "Running",
                        "the run is running",
                        now,
                    );
                    next.actions.push(Action::RecordStatus(RunStatus::Running, None));
                    next.actions.push(Action::Event {
                        warning: false,
                        reason: "Started".into(),
                        note: "the runner started".into(),
                    });
                }
                next.set()
            }
            PodPhase::Succeeded => match &observed.outcome {
                Some(outcome) => next.end_as_reported(outcome),
                None => next.finish(AgentRunPhase::Failed, "ResultMissing", "the runner ended without a result".into()),
            },
            PodPhase::Failed => {
                let message = pod.message.clone().unwrap_or_default();
                match (pod.reason.as_deref(), &pod.runner, &observed.outcome) {
                    (Some("Evicted"), _, _) => next.finish(
                        AgentRunPhase::Interrupted,
                        "Evicted",
                        format!("the sandbox pod was evicted: {message}"),
                    ),
                    (Some("DeadlineExceeded"), _, _) => next.finish(
                        AgentRunPhase::Failed,
                        "DeadlineExceeded",
                        "the sandbox pod passed its active deadline".into(),
                    ),
                    (_, Some(t), _) if t.reason == "OOMKilled" => next.finish(
                        AgentRunPhase::Failed,
                        "OOMKilled",
                        "the runner ran out of memory; raise the sandbox memory limit".into(),
                    ),
                    (_, _, Some(outcome)) => next.end_as_reported(outcome),
                    (_, runner, None) => {
                        let exit = runner.as_ref().map_or("unknown".to_string(), |t| t.exit_code.to_string());
                        next.finish(AgentRunPhase::Failed, "PodFailed", format!("the runner exited with code {exit}"))
                    }
                }
            }
            PodPhase::Unknown => next.wait(settings.recheck),
        },
    }
}

/// The approval path: a run whose runner paused it for a person (its pod ended, the store says
/// `waiting`) becomes `Waiting`, its pod removed; a waiting run the store says is resumed (`pending`)
/// gets a new pod, its start time moved on by the time it waited; a waiting run the store ended (a
/// cancel, a time-out) ends as its result says. `None` when the run has nothing to do with approvals.
fn waiting(
    next: &mut Transition,
    observed: &Observed<'_>,
    phase: AgentRunPhase,
    settings: &Settings,
) -> Option<Vec<Action>> {
    use crate::run::approval::APPROVAL_REQUIRED;
    let recorded = observed.recorded.as_ref()?;
    let pod = observed.pod.as_ref();
    let now = observed.now;
    let since = || {
        next.status
            .conditions
            .iter()
            .find(|c| c.type_ == APPROVAL_REQUIRED && c.status == "True")
            .map(|c| c.last_transition_time.0)
    };
    match (phase, recorded.status) {
        (AgentRunPhase::Waiting, RunStatus::Waiting) => {
            let mut actions = Vec::new();
            if pod.is_some_and(|p| !p.deleting) {
                actions.push(Action::DeletePod);
            }
            Some(actions)
        }
        (AgentRunPhase::Waiting, RunStatus::Pending) => {
            if pod.is_some() {
                let mut actions = vec![];
                if pod.is_some_and(|p| !p.deleting) {
                    actions.push(Action::DeletePod);
                }
                actions.push(Action::RequeueAfter(settings.recheck));
                return Some(actions);
            }
            // The time it ran before it paused is kept: the deadline counts running time only.
            let waited = since().map(|at| now.duration_since(at)).unwrap_or_default();
            let started = next.status.start_time.as_ref().map(|t| t.0).unwrap_or(now);
            next.status.start_time = Some(Time(started.checked_add(waited).unwrap_or(now)));
            next.status.phase = Some(AgentRunPhase::Pending);
            next.status.pod_name = None;
            next.status.pending_approval = None;
            set_condition(&mut next.status.conditions, APPROVAL_REQUIRED, "False", "Resumed", "a person decided", now);
            next.actions.push(Action::Event {
                warning: false,
                reason: "Resumed".into(),
                note: "a person decided; the run goes on".into(),
            });
            None
        }
        (AgentRunPhase::Waiting, status) if status.is_terminal() => match &observed.outcome {
            Some(outcome) => Some(std::mem::replace(next, Transition::empty(now)).end_as_reported(outcome)),
            None => Some(std::mem::replace(next, Transition::empty(now)).finish(
                AgentRunPhase::Failed,
                "RunnerFailed",
                recorded.error.clone().unwrap_or_else(|| "the run ended while it waited".into()),
            )),
        },
        (AgentRunPhase::Pending | AgentRunPhase::Running, RunStatus::Waiting) if pod.is_none_or(|p| p.ended()) => {
            let waiting = recorded.waiting.clone();
            let calls: Vec<String> =
                waiting.iter().flat_map(|w| w.action_requests.iter().map(|r| r.name.clone())).collect();
            next.status.phase = Some(AgentRunPhase::Waiting);
            next.status.reason = Some(APPROVAL_REQUIRED.into());
            next.status.message = Some(format!("waiting for a person's decision on {}", calls.join(", ")));
            next.status.pending_approval = waiting.map(|w| crate::resources::PendingApproval {
                tool_calls: w
                    .action_requests
                    .iter()
                    .map(|r| crate::resources::PendingCall {
                        tool_call_id: r.tool_call_id.clone(),
                        name: r.name.clone(),
                    })
                    .collect(),
                expires_at: w.expires_at,
            });
            set_condition(
                &mut next.status.conditions,
                APPROVAL_REQUIRED,
                "True",
                APPROVAL_REQUIRED,
                "the run waits for a person",
                now,
            );
            if pod.is_some_and(|p| !p.deleting) {
                next.actions.push(Action::DeletePod);
            }
            next.actions.push(Action::Event {
                warning: false,
                reason: APPROVAL_REQUIRED.into(),
                note: format!("waiting for a person's decision on {}", calls.join(", ")),
            });
            Some(std::mem::replace(next, Transition::empty(now)).set())
        }
        _ => None,
    }
}

/// The cancel path: a run not started ends at once; a running one is signalled, then its pod deleted
/// after the grace period.
fn cancel(mut next: Transition, observed: &Observed<'_>, settings: &Settings) -> Vec<Action> {
    let pod = observed.pod.as_ref();
    let now = observed.now;
    let alive = pod.is_some_and(|p| !p.ended() && !p.deleting);
    if !alive {
        // Never started, or its pod has ended or is going: the run is over.
        if let Some(outcome) = observed.outcome.as_ref().filter(|o| o.status == RunStatus::Completed) {
            return next.end_as_reported(outcome);
        }
        let started = next.status.pod_name.is_some();
        let note = if started { "cancelled" } else { "cancelled before it started" };
        return next.finish(AgentRunPhase::Cancelled, "Cancelled", note.into());
    }
    let requested = next.status.conditions.iter().find(|c| c.type_ == CANCEL_REQUESTED && c.status == "True");
    match requested.map(|c| c.last_transition_time.0) {
        None => {
            next.status.phase = Some(AgentRunPhase::CancelRequested);
            next.status.reason = Some("CancelRequested".into());
            next.status.message = Some("the runner was asked to stop".into());
            set_condition(
                &mut next.status.conditions,
                CANCEL_REQUESTED,
                "True",
                "CancelRequested",
                "spec.cancel is true",
                now,
            );
            next.actions.push(Action::SignalCancel);
            next.actions.push(Action::RecordStatus(RunStatus::CancelRequested, None));
            next.actions.push(Action::Event {
                warning: false,
                reason: "CancelRequested".into(),
                note: "the runner was asked to stop".into(),
            });
            let mut actions = next.set();
            actions.push(Action::RequeueAfter(settings.cancel_grace));
            actions
        }
        Some(at) => match until(now, at + jiff::SignedDuration::try_from(settings.cancel_grace).unwrap_or_default()) {
            Some(wait) => next.wait(wait),
            None => {
                next.actions.push(Action::DeletePod);
                next.finish(
                    AgentRunPhase::Cancelled,
                    "Cancelled",
                    format!(
                        "the runner did not stop within {} s; its pod was deleted",
                        settings.cancel_grace.as_secs()
                    ),
                )
            }
        },
    }
}

/// A status being computed, with the actions so far.
struct Transition {
    status: AgentRunStatus,
    now: jiff::Timestamp,
    actions: Vec<Action>,
}

impl Transition {
    /// A transition with no status and no action, to swap out of a borrowed one.
    fn empty(now: jiff::Timestamp) -> Self {
        Transition { status: AgentRunStatus::default(), now, actions: Vec::new() }
    }

    /// Ends the run in `phase`, with the events, the record and the children that go with an end.
    fn finish(mut self, phase: AgentRunPhase, reason: &str, message: String) -> Vec<Action> {
        let now = self.now;
        self.status.phase = Some(phase);
        self.status.reason = Some(reason.to_string());
        self.status.message = Some(message.clone());
        self.status.completion_time = Some(Time(now));
        let succeeded = if phase == AgentRunPhase::Completed { "True" } else { "False" };
        set_condition(&mut self.status.conditions, SUCCEEDED, succeeded, reason, &message, now);
        let (record, warning) = match phase {
            AgentRunPhase::Completed => (RunStatus::Completed, false),
            AgentRunPhase::Cancelled => (RunStatus::Cancelled, false),
            AgentRunPhase::Interrupted => (RunStatus::Interrupted, true),
            _ => (RunStatus::Failed, true),
        };
        let error = (phase != AgentRunPhase::Completed && phase != AgentRunPhase::Cancelled).then(|| message.clone());
        self.actions.push(Action::RecordStatus(record, error));
        self.actions.push(Action::CancelChildren);
        self.actions.push(Action::DeleteCredentials);
        self.actions.push(Action::Event { warning, reason: reason.to_string(), note: message });
        self.set()
    }

    /// Ends the run as the runner's stored result says.
    fn end_as_reported(mut self, outcome: &Outcome) -> Vec<Action> {
        if let Some(output) = &outcome.output {
            self.status.result = Some(output.chars().take(RESULT_MAX_CHARS).collect());
        }
        if outcome.token_usage.is_some() {
            self.status.token_usage = outcome.token_usage.clone();
        }
        if outcome.tree_token_usage.is_some() {
            self.status.tree_token_usage = outcome.tree_token_usage.clone();
        }
        if !outcome.tree_cost.is_empty() {
            self.status.tree_cost = outcome.tree_cost.clone();
        }
        match outcome.status {
            RunStatus::Completed => self.finish(AgentRunPhase::Completed, "Completed", "the run completed".into()),
            RunStatus::Cancelled => self.finish(AgentRunPhase::Cancelled, "Cancelled", "the run was cancelled".into()),
            _ => {
                let error = outcome.error.clone().unwrap_or_else(|| "the runner reported a failure".into());
                let reason = outcome.reason.clone().unwrap_or_else(|| "RunnerFailed".into());
                self.finish(AgentRunPhase::Failed, &reason, error)
            }
        }
    }

    /// The status as computed (its conditions stamped with its `observedGeneration`), then the actions.
    fn set(mut self) -> Vec<Action> {
        let generation = self.status.observed_generation;
        self.status.conditions.iter_mut().for_each(|c| c.observed_generation = generation);
        let mut actions = vec![Action::SetStatus(Box::new(self.status))];
        actions.extend(self.actions);
        actions
    }

    /// Nothing changes; look again after `wait`.
    fn wait(self, wait: Duration) -> Vec<Action> {
        let mut actions = self.actions;
        actions.push(Action::RequeueAfter(wait));
        actions
    }
}

/// How long from `now` until `at`; `None` when `at` has come.
fn until(now: jiff::Timestamp, at: jiff::Timestamp) -> Option<Duration> {
    let left = at.duration_since(now);
    (left.is_positive()).then(|| Duration::try_from(left).unwrap_or_default())
}

/// Sets the condition `type_`, keeping its `lastTransitionTime` when its status does not change.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: jiff::Timestamp,
) {
    let previous = conditions.iter().position(|c| c.type_ == type_);
    let since = match previous.map(|i| &conditions[i]) {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(now),
    };
    let condition = Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.to_string(),
        message: message.to_string(),
        last_transition_time: since,
        observed_generation: None,
    };
    match previous {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
}

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

/// The sandbox settings of the run's pod: the installation's, with the namespace's own trace export
/// in place of the installation's when it names one.
fn namespace_sandbox<'a>(
    observed: &Observed<'_>,
    sandbox: &'a crate::controller::pod::SandboxSettings,
) -> std::borrow::Cow<'a, crate::controller::pod::SandboxSettings> {
    namespace_settings(observed.traces.as_ref(), &observed.mcp_servers, sandbox)
}

/// The sandbox settings of a run of a namespace: the installation's, with the namespace's own trace
/// export (`traces`) and the McpServers its agent names (`mcp_servers`) added.
pub fn namespace_settings<'a>(
    traces: Option<&crate::controller::pod::TraceExport>,
    mcp_servers: &crate::run::inputs::McpServers,
    sandbox: &'a crate::controller::pod::SandboxSettings,
) -> std::borrow::Cow<'a, crate::controller::pod::SandboxSettings> {
    if traces.is_none() && mcp_servers.is_empty() {
        return std::borrow::Cow::Borrowed(sandbox);
    }
    let mut owned = sandbox.clone();
    if let Some(traces) = traces {
        owned.traces = Some(traces.clone());
    }
    // The installation's servers are configured first: an McpServer of the same name does not replace one.
    for (name, server) in mcp_servers {
        if let Ok(server) = serde_json::to_value(server) {
            owned.mcp_servers.entry(name.clone()).or_insert(server);
        }
    }
    std::borrow::Cow::Owned(owned)
}
