//! `POST /api/agent/runs`: a user's start of a run of an ordinary agent, or the resume of a waiting one
//! ([`crate::facade::services::approvals`]). A thread with an unfinished run answers 409 `run_busy`, or queues the start
//! when the body asks so.

use axum::Json;
use axum::extract::State;

use super::request::{StartRun, budget_of, checked};
use super::started::StartedParentRun;
use crate::facade::http::auth::Caller;
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::facade::http::limits::run_limited;
use crate::facade::services::agent_views::visible;
use crate::facade::services::approvals::ResumeContext;
use crate::facade::services::conversations::note_run;
use crate::facade::services::launch::check_startable;
use crate::facade::services::model_access::check_run_model;
use crate::facade::services::owned_runs::mine;
use crate::facade::services::run_queue::{self, QueuePolicy};
use crate::facade::services::run_starts::{check_quotas, launch_parent};
use crate::facade::services::state::FacadeState;
use crate::run::thread_id::is_valid_id;
use crate::run::{RunRecord, RunStatus};

/// `POST /api/agent/runs`: starts a run of an ordinary agent for the caller. The run gets its own
/// credentials: through them its model may delegate to the subagents the agent allows the caller, and
/// act on its own child runs only. A thread with an unfinished run answers 409 `run_busy`.
#[utoipa::path(
    post,
    path = "/api/agent/runs",
    operation_id = "start_run",
    tag = "runs",
    request_body = StartRun,
    responses(
        (status = 200, description = "the run started", body = StartedParentRun),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 409, description = "`run_busy`: the thread has an unfinished run; `run_interrupted`: a start that would queue finds the thread's run waiting for its user's decisions; or a resume of a run that is not waiting", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 429, description = "a limit is reached; `field` names its setting", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds until a retry may succeed"))),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn start(
    State(state): State<FacadeState>,
    Caller(who): Caller,
    JsonBody(mut body): JsonBody<StartRun>,
) -> Result<Json<StartedParentRun>, ApiError> {
    let store = state.store()?;
    let query = body.query.take().unwrap_or_default();
    if let Some(resume) = body.resume {
        // The run goes on as it started: a field that would start it otherwise is refused, not
        // ignored. (`agent_slug` and `meta`, which Yuxi's client repeats, are ignored; its
        // `queue_policy: enqueue` is what a resume does; `created_by_run_id` and `thread_id` name the
        // waiting run.)
        let starts_otherwise = [
            ("query", !query.trim().is_empty()),
            ("tool_approval_mode", body.tool_approval_mode.is_some()),
            ("budget", body.budget.is_some()),
            ("model_spec", body.model_spec.as_deref().is_some_and(|m| !m.is_empty())),
            ("queue_policy", body.queue_policy.is_some_and(|p| p != QueuePolicy::Enqueue)),
            ("image_content", body.image_content.as_deref().is_some_and(|i| !i.is_empty())),
        ];
        if let Some((field, _)) = starts_otherwise.iter().find(|(_, given)| *given) {
            return Err(ApiError::invalid(*field, "does not apply to a resume: the run goes on as it started"));
        }
        // A resumed run spends tokens again: a quota used up meanwhile holds it.
        check_quotas(&state, &who.uid).await?;
        let context = ResumeContext {
            created_by_run_id: body.created_by_run_id.as_deref(),
            thread_id: body.thread_id.as_deref(),
        };
        return crate::facade::services::approvals::resume(&state, &who, resume, context)
            .await
            .map(|record| Json(StartedParentRun::running(&record, Default::default())));
    }
    if query.trim().is_empty() {
        return Err(ApiError::invalid("query", "is empty"));
    }
    let agent = visible(state.agents.get(&body.agent_slug).await?, &who, &body.agent_slug)?;
    if agent.spec.is_subagent() {
        return Err(ApiError::invalid(
            "agent_slug",
            format!("{:?} is a subagent: subagents run when a main agent delegates to them", body.agent_slug),
        ));
    }
    let thread_id = match &body.thread_id {
        None => format!("t-{}", uuid::Uuid::new_v4().simple()),
        Some(thread) if !is_parent_thread_id(thread) => {
            return Err(ApiError::invalid(
                "thread_id",
                format!(
                    "{thread:?} is not a conversation thread id (letters, digits, '.', '_', '-'; at most {} characters)",
                    crate::run::thread_id::MAX_PARENT_THREAD_ID_LEN
                ),
            ));
        }
        Some(thread) => thread.clone(),
    };
    let earlier = match body.created_by_run_id.as_deref().filter(|id| !id.is_empty()) {
        Some(id) => mine(store, &who, id).await.ok(),
        None => None,
    };
    let request = checked(&body, &who, &agent, &thread_id, earlier.as_ref(), state.models.default_model())?;
    check_run_model(&state, &who, &agent, request.model_spec.as_deref()).await?;
    let max_tokens = budget_of(body.budget, &agent, &who)?;
    check_quotas(&state, &who.uid).await?;
    let run_id = uuid::Uuid::new_v4().simple().to_string();
    let request = request.summarized(&query);
    let record = RunRecord::started_by(&who, run_id, thread_id.clone(), body.agent_slug.clone(), request, max_tokens);
    check_startable(&record, &query, "query")?;
    // The thread is the caller's, or nobody's yet and now the caller's: one atomic step, so a thread of
    // another user answers as a missing one, and its runs are never named. Claimed only by a request that
    // has passed every check.
    if !store.claim_thread(&thread_id, &who.uid).await? {
        return Err(ApiError::NotFound(format!("thread {thread_id:?} does not exist")));
    }
    let policy = body.queue_policy.unwrap_or_default();
    match store.create_run(&record, None, state.limits.runs).await? {
        crate::run::Created::Started => {}
        crate::run::Created::Limited(limit) => {
            return Err(run_limited(limit, &state.limits.runs));
        }
        crate::run::Created::Busy(active) | crate::run::Created::Existing(active) => {
            let status = store.run_record(&active).await?.map(|r| r.status);
            if policy != QueuePolicy::Reject {
                // As Yuxi: a message is not queued behind a run that waits for its user's decisions (the
                // client keeps the message and asks for the decisions again).
                if status == Some(RunStatus::Waiting) {
                    return Err(ApiError::RunInterrupted {
                        thread_id,
                        active_run_id: active,
                        agent_slug: body.agent_slug,
                    });
                }
                let queued = run_queue::enqueue(&state, &who, record, query, policy, &active).await?;
                return Ok(Json(StartedParentRun::queued(queued, policy)));
            }
            return Err(ApiError::RunBusy {
                thread_id,
                active_run_id: active,
                active_run_status: status.unwrap_or(RunStatus::Running).as_str().into(),
                agent_slug: body.agent_slug,
            });
        }
    }
    run_queue::note_dispatched(store, &who, &record, &query, policy).await?;
    note_run(store, &record, &query).await?;
    launch_parent(&state, &who, agent, &record, query);
    Ok(Json(StartedParentRun::running(&record, policy)))
}

/// Whether `thread` can name a conversation: an id, not a child thread, within the length.
fn is_parent_thread_id(thread: &str) -> bool {
    is_valid_id(thread) && !thread.contains("_sub_") && thread.len() <= crate::run::thread_id::MAX_PARENT_THREAD_ID_LEN
}
