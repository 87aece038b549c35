//! (Over 500 lines with its tests: six handlers over one parent-resolution and ownership path.)
//! The subagent tools for parent agents (SEED-subagents.md "同步调用与异步调用"):
//! `POST /api/tools/{task, subagent_start, subagent_status, subagent_events, subagent_cancel, subagent_await}`.
//!
//! Every body names the calling parent. A run-id tool answers a run created by another parent run, or for
//! another user, exactly as a run that does not exist.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use kube::ResourceExt;
use serde::Deserialize;
use serde_json::Value;

use super::FacadeState;
use super::launch::check_startable;
use crate::access::{Permission, allowed_subagents, permission};
use crate::delegation::progress::{PROGRESS_SCAN, summarize};
use crate::delegation::wire::{
    AnswerOk, Busy, BusyThread, CancelAnswer, EventItem, EventsAnswer, EventsBody, Parent, RunBody, RunEnded, Snapshot,
    StartAnswer, StartBody, StartStatus, StartedRun, TaskAnswer, ToolsAnswer, WaitAnyAnswer, WaitAnyBody, is_stream_id,
};
use crate::delegation::{MAX_AWAIT_SECONDS, MAX_EVENTS_LIMIT, MAX_WAIT_ANY_RUNS};
use crate::facade::http::auth::ParentCaller;
use crate::facade::http::body::JsonBody;
use crate::facade::http::error::{ApiError, ErrorBody};
use crate::resources::ParentRef;
use crate::run::record::start_key;
use crate::run::thread_id::{child_thread_id, is_child_thread_of, is_valid_id};
use crate::run::{Created, RunRecord, RunStatus};
use crate::store::{RunView, Store};

/// The run store, or 503 when the facade has none.
pub(super) fn runs(state: &FacadeState) -> Result<&Store, ApiError> {
    state
        .runs
        .as_ref()
        .map(|r| &r.store)
        .ok_or_else(|| ApiError::Unavailable("this facade has no run store: it serves agents only".into()))
}

/// The parent of a tool call: from the run's credentials when a run calls (with the body's tool call id),
/// else from the body, every id checked.
fn parent_of(caller: &ParentCaller, parent: &Parent) -> Result<ParentRef, ApiError> {
    if let Some(run) = &caller.run {
        return Ok(ParentRef {
            run_id: run.run_id.clone(),
            thread_id: run.thread_id.clone(),
            agent: run.agent.clone(),
            file_thread_id: Some(run.file_thread_id.clone()),
            tool_call_id: parent.tool_call_id.clone(),
            root_run_id: None,
        });
    }
    let required = |field: &str, value: &Option<String>| {
        value.clone().ok_or_else(|| ApiError::invalid(format!("parent.{field}"), "is required"))
    };
    let resolved = ParentRef {
        agent: required("agent", &parent.agent)?,
        run_id: required("run_id", &parent.run_id)?,
        thread_id: required("thread_id", &parent.thread_id)?,
        file_thread_id: parent.file_thread_id.clone(),
        tool_call_id: parent.tool_call_id.clone(),
        root_run_id: None,
    };
    for (field, id) in [("parent.run_id", &resolved.run_id), ("parent.thread_id", &resolved.thread_id)] {
        if !is_valid_id(id) {
            return Err(ApiError::invalid(field, format!("{id:?} is not a valid id")));
        }
    }
    if resolved.thread_id.len() > crate::run::thread_id::MAX_PARENT_THREAD_ID_LEN {
        return Err(ApiError::invalid(
            "parent.thread_id",
            format!("is longer than {} characters", crate::run::thread_id::MAX_PARENT_THREAD_ID_LEN),
        ));
    }
    if let Some(id) = &resolved.file_thread_id
        && !is_valid_id(id)
    {
        return Err(ApiError::invalid("parent.file_thread_id", format!("{id:?} is not a valid id")));
    }
    Ok(resolved)
}

/// Starts (or finds) a subagent run; the answer of `subagent_start`.
pub(crate) async fn start(
    state: &FacadeState,
    caller: &ParentCaller,
    body: &StartBody,
) -> Result<StartAnswer, ApiError> {
    let store = runs(state)?;
    let who = &caller.who;
    let mut parent = parent_of(caller, &body.parent)?;
    // A caller acts for itself: the parent run, its thread and its file thread must be the caller's (or
    // nobody's yet: they become the caller's once the run is created), else they answer as if they did
    // not exist. And only a running run starts children, whoever calls.
    let foreign = || ApiError::NotFound(format!("parent run {:?} does not exist", parent.run_id));
    let file_thread = parent.file_thread_id.clone().unwrap_or_else(|| parent.thread_id.clone());
    // A child of a run of this system joins its parent's tree: the tree's root, and its budget.
    let mut inherited_budget = None;
    match store.run_record(&parent.run_id).await? {
        Some(record) if record.uid != who.uid => return Err(foreign()),
        Some(record) if record.status != RunStatus::Running => {
            return Err(ApiError::Conflict(format!(
                "the parent run {} is {}; only a running run starts subagents",
                record.run_id,
                record.status.as_str()
            )));
        }
        Some(record) => {
            parent.root_run_id = Some(record.root_run_id().to_string()).filter(|root| *root != parent.run_id);
            inherited_budget = Some(record.max_tokens);
        }
        None if caller.run.is_some() => {
            return Err(ApiError::Conflict(format!(
                "the parent run {} is gone; only a running run starts subagents",
                parent.run_id
            )));
        }
        None => {}
    }
    if caller.run.is_none() {
        for thread in [&parent.thread_id, &file_thread] {
            if store.thread_owner(thread).await?.is_some_and(|owner| owner != who.uid) {
                return Err(foreign());
            }
        }
    }
    if body.description.trim().is_empty() {
        return Err(ApiError::invalid("description", "is empty"));
    }
    let all = state.agents.all().await?;
    let parent_agent = all
        .iter()
        .find(|a| a.name_any() == parent.agent && permission(who, a) >= Permission::Read)
        .ok_or_else(|| ApiError::NotFound(format!("parent agent {:?} does not exist", parent.agent)))?;
    let allowed = allowed_subagents(parent_agent, &all, who);
    let Some(subagent) = allowed.iter().find(|a| a.name_any() == body.subagent_slug).map(|a| (*a).clone()) else {
        let names: Vec<String> = allowed.iter().map(|a| a.name_any()).collect();
        return Err(ApiError::invalid(
            "subagent_slug",
            format!("{:?} is not allowed here; allowed: {}", body.subagent_slug, names.join(", ")),
        ));
    };
    let slug = subagent.name_any();
    // The tree's budget. A parent outside the system starts a tree, with the smaller of the subagent's
    // own budget and the parent agent's: the parent agent's budget bounds what its delegations spend
    // whether or not its parent run is one of this system's.
    let own = |agent: &crate::resources::Agent| agent.spec.budget.as_ref().and_then(|b| b.max_tokens);
    let max_tokens = inherited_budget.unwrap_or_else(|| match (own(&subagent), own(parent_agent)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    });
    super::runs::check_quotas(state, &who.uid).await?;
    let (thread_id, continuing) = match &body.thread_id {
        Some(thread) if is_child_thread_of(thread, &parent.thread_id, &slug) => {
            if store.thread_owner(thread).await?.is_some_and(|owner| owner != who.uid) {
                return Err(ApiError::invalid(
                    "thread_id",
                    format!("{thread:?} is not a thread of {slug} under parent thread {:?}", parent.thread_id),
                ));
            }
            (thread.clone(), true)
        }
        Some(thread) => {
            return Err(ApiError::invalid(
                "thread_id",
                format!("{thread:?} is not a thread of {slug} under parent thread {:?}", parent.thread_id),
            ));
        }
        None => (child_thread_id(&parent.thread_id, &slug, uuid::Uuid::new_v4().as_u128() as u32), false),
    };
    let record = RunRecord {
        run_id: uuid::Uuid::new_v4().simple().to_string(),
        thread_id: thread_id.clone(),
        agent_slug: slug.clone(),
        uid: who.uid.clone(),
        parent: Some(parent.clone()),
        status: RunStatus::Pending,
        error: None,
        created_at: jiff::Timestamp::now().to_string(),
        request: Default::default(),
        max_tokens,
        waiting: None,
    };
    check_startable(&record, &body.description, "description")?;
    // Claimed only now, by a request that has passed every check: a refused start claims nothing.
    if caller.run.is_none() {
        for thread in [&parent.thread_id, &file_thread] {
            if !store.claim_thread(thread, &who.uid).await? {
                return Err(foreign());
            }
        }
    }
    let key = parent.tool_call_id.as_deref().map(|call| start_key(&who.uid, &parent.run_id, &slug, call));
    let created = store.create_run(&record, key.as_deref(), state.limits.runs).await?;
    let describe = |status: StartStatus, record: &RunRecord| {
        StartAnswer::Run(StartedRun {
            status,
            run_id: record.run_id.clone(),
            thread_id: record.thread_id.clone(),
            subagent_slug: record.agent_slug.clone(),
            subagent_name: subagent.spec.display_name.clone().unwrap_or_else(|| slug.clone()),
            created_by_run_id: parent.run_id.clone(),
            run_status: record.status,
            continuing,
            events_url: crate::delegation::wire::events_url(&record.run_id),
            result_url: crate::delegation::wire::result_url(&record.run_id),
        })
    };
    match created {
        Created::Started => {
            let launcher = &state.runs.as_ref().expect("checked above").launcher;
            // A subagent's run calls the facade for its knowledge bases only: it delegates to nobody
            // (`allowed_subagents` is empty for it) and has no children to act on.
            let token = super::runs::run_token(state, who, &record, &file_thread);
            launcher.launch(store.clone(), record.clone(), subagent.clone(), body.description.clone(), Some(token));
            state.metrics.run_started(&slug, true);
            Ok(describe(StartStatus::Started, &record))
        }
        Created::Existing(run_id) => {
            // The key names the caller, so this is the caller's own retry; checked all the same.
            let existing = store
                .run_record(&run_id)
                .await?
                .filter(|existing| existing.uid == who.uid)
                .ok_or_else(|| ApiError::NotFound("run vanished".into()))?;
            Ok(describe(StartStatus::Existing, &existing))
        }
        Created::Limited(limit) => Err(crate::facade::http::limits::run_limited(limit, &state.limits.runs)),
        Created::Busy(active) => {
            let status = store.run_record(&active).await?.map(|r| r.status).unwrap_or(RunStatus::Running);
            Ok(StartAnswer::Busy(BusyThread {
                status: Busy::Busy,
                thread_id,
                active_run_id: active,
                active_run_status: status,
                message: "the thread already has an unfinished run; await or cancel it, or start a new thread".into(),
            }))
        }
    }
}

/// The run (record, result and last events, in one read), when it was created by this parent run for this
/// user; otherwise not found, whether it exists or not.
async fn owned(store: &Store, caller: &ParentCaller, body: &RunBody) -> Result<RunView, ApiError> {
    let parent_run = match &caller.run {
        Some(run) => run.run_id.clone(),
        None => body.parent.run_id.clone().ok_or_else(|| ApiError::invalid("parent.run_id", "is required"))?,
    };
    let who = &caller.who;
    let missing = || ApiError::NotFound("run does not exist or does not belong to the current parent run".into());
    if !is_valid_id(&body.run_id) {
        return Err(missing());
    }
    let view = store.run_view(&body.run_id, PROGRESS_SCAN).await?.ok_or_else(missing)?;
    let record = &view.record;
    let mine = record.uid == who.uid && record.parent.as_ref().is_some_and(|p| p.run_id == parent_run);
    if mine { Ok(view) } else { Err(missing()) }
}

/// The run as it is now, read in one round trip.
async fn snapshot(store: &Store, record: &RunRecord) -> Result<Snapshot, ApiError> {
    match store.run_view(&record.run_id, PROGRESS_SCAN).await? {
        Some(view) => Ok(snapshot_of(&view)),
        None => Err(ApiError::NotFound("run vanished".into())),
    }
}

/// What `subagent_status` answers for `view`.
pub(super) fn snapshot_of(view: &RunView) -> Snapshot {
    let record = &view.record;
    let result = record
        .status
        .is_terminal()
        .then(|| view.result.as_ref().map(|r| Value::String(r.output.clone())).unwrap_or(Value::Null));
    Snapshot {
        status: record.status,
        run_id: record.run_id.clone(),
        thread_id: record.thread_id.clone(),
        subagent_slug: record.agent_slug.clone(),
        error: record.error.clone(),
        progress: summarize(&view.recent),
        events_url: crate::delegation::wire::events_url(&record.run_id),
        result_url: crate::delegation::wire::result_url(&record.run_id),
        result,
        wait_timed_out: None,
        message: None,
    }
}

/// Waits until the run ends or `timeout` passes. A store that fails meanwhile is waited out: only a
/// failure that lasts until the timeout answers 503.
async fn wait(store: &Store, run_id: &str, timeout: Duration) -> Result<(RunRecord, bool), ApiError> {
    let deadline = tokio::time::Instant::now() + timeout;
    let watch = store.watch(run_id);
    loop {
        let now = tokio::time::Instant::now();
        // Taken before the look: the run's end wakes the wait at once.
        let changed = watch.changed(deadline.saturating_duration_since(now));
        match store.run_record(run_id).await {
            Ok(None) => return Err(ApiError::NotFound("run vanished".into())),
            Ok(Some(record)) if record.status.is_terminal() => return Ok((record, false)),
            Ok(Some(record)) if now >= deadline => return Ok((record, true)),
            Ok(Some(_)) => {}
            Err(err) if now >= deadline => return Err(err.into()),
            Err(err) => tracing::warn!(run_id = %run_id, error = %err, "the run store fails; still waiting"),
        }
        changed.await;
    }
}

/// The wait `timeout_seconds` asks for: 1..=1800 seconds, 1800 when absent. Errors: 422 naming the field.
pub(crate) fn await_timeout(requested: Option<u64>) -> Result<Duration, ApiError> {
    match requested {
        None => Ok(Duration::from_secs(MAX_AWAIT_SECONDS)),
        Some(seconds) if (1..=MAX_AWAIT_SECONDS).contains(&seconds) => Ok(Duration::from_secs(seconds)),
        Some(seconds) => {
            Err(ApiError::invalid("timeout_seconds", format!("must be within 1..{MAX_AWAIT_SECONDS} (is {seconds})")))
        }
    }
}

/// `GET /api/tools` query.
#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ToolsQuery {
    /// The agent whose tools are asked for.
    pub agent: String,
}

/// `GET /api/tools?agent=<slug>`: the subagent tools' schemas and the prompt section listing the
/// subagents this agent may call for the caller, so any agent runtime can mount them. A subagent, or an
/// agent with no allowed subagent, gets no tools.
#[utoipa::path(
    get,
    path = "/api/tools",
    operation_id = "list_tools",
    tag = "tools",
    params(ToolsQuery),
    responses(
        (status = 200, description = "the tools and the prompt section", body = ToolsAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn list_tools(
    State(state): State<FacadeState>,
    ParentCaller { who, .. }: ParentCaller,
    crate::facade::http::body::QueryParams(query): crate::facade::http::body::QueryParams<ToolsQuery>,
) -> Result<Json<ToolsAnswer>, ApiError> {
    let all = state.agents.all().await?;
    let agent = all
        .iter()
        .find(|a| a.name_any() == query.agent && permission(&who, a) >= Permission::Read)
        .ok_or_else(|| ApiError::NotFound(format!("agent {:?} does not exist", query.agent)))?;
    let allowed = allowed_subagents(agent, &all, &who);
    let prompt = crate::delegation::subagent_prompt(&allowed);
    let tools = if prompt.is_some() { crate::delegation::tool_schemas() } else { Vec::new() };
    let subagents: Vec<String> = allowed.iter().map(|a| a.name_any()).collect();
    Ok(Json(ToolsAnswer { agent: query.agent, subagents, tools, prompt }))
}

/// `POST /api/tools/subagent_start`.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_start",
    operation_id = "subagent_start",
    tag = "tools",
    request_body = StartBody,
    responses(
        (status = 200, description = "started, existing or busy", body = StartAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 409, description = "the parent run has ended: only a running run starts subagents", body = ErrorBody),
        (status = 429, description = "a limit is reached; `field` names its setting", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds until a retry may succeed"))),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_start(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<StartBody>,
) -> Result<Json<StartAnswer>, ApiError> {
    start(&state, &caller, &body).await.map(Json)
}

/// `POST /api/tools/subagent_status`.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_status",
    operation_id = "subagent_status",
    tag = "tools",
    request_body = RunBody,
    responses(
        (status = 200, description = "the run and its latest messages", body = Snapshot),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_status(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<RunBody>,
) -> Result<Json<Snapshot>, ApiError> {
    let store = runs(&state)?;
    Ok(Json(snapshot_of(&owned(store, &caller, &body).await?)))
}

/// `POST /api/tools/subagent_await`: the terminal result, or the current snapshot with
/// `wait_timed_out: true`.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_await",
    operation_id = "subagent_await",
    tag = "tools",
    request_body = RunBody,
    responses(
        (status = 200, description = "the ended run, or the current snapshot with `wait_timed_out`", body = Snapshot),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_await(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<RunBody>,
) -> Result<Json<Snapshot>, ApiError> {
    let store = runs(&state)?;
    let timeout = await_timeout(body.timeout_seconds)?;
    let record = owned(store, &caller, &body).await?.record;
    let (record, timed_out) = wait(store, &record.run_id, timeout).await?;
    let mut answer = snapshot(store, &record).await?;
    if timed_out {
        answer.wait_timed_out = Some(true);
        answer.message = Some("the run is still going; await it again or read its status".into());
    }
    Ok(Json(answer))
}

/// `POST /api/tools/subagent_cancel`.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_cancel",
    operation_id = "subagent_cancel",
    tag = "tools",
    request_body = RunBody,
    responses(
        (status = 200, description = "the run after the cancel", body = CancelAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_cancel(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<RunBody>,
) -> Result<Json<CancelAnswer>, ApiError> {
    let store = runs(&state)?;
    let record = owned(store, &caller, &body).await?.record;
    let record = store.cancel_run(&record.run_id).await?.unwrap_or(record);
    Ok(Json(CancelAnswer::of(record)))
}

/// `POST /api/tools/subagent_events`: up to `limit` (1..50) events after `after_seq`, in stream order.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_events",
    operation_id = "subagent_events",
    tag = "tools",
    request_body = EventsBody,
    responses(
        (status = 200, description = "a page of events", body = EventsAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_events(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<EventsBody>,
) -> Result<Json<EventsAnswer>, ApiError> {
    let store = runs(&state)?;
    if !(1..=MAX_EVENTS_LIMIT).contains(&body.limit) {
        return Err(ApiError::invalid("limit", format!("must be within 1..{MAX_EVENTS_LIMIT} (is {})", body.limit)));
    }
    let bad_cursor = || {
        ApiError::invalid(
            "after_seq",
            format!("{:?} is not a stream id such as 0-0 or 1764460800000-0", body.after_seq),
        )
    };
    if !body.tree && !is_stream_id(&body.after_seq) {
        return Err(bad_cursor());
    }
    let record = owned(
        store,
        &caller,
        &RunBody { parent: body.parent.clone(), run_id: body.run_id.clone(), timeout_seconds: None },
    )
    .await?
    .record;
    let item = |e: crate::run::StoredEvent| EventItem {
        seq: e.seq,
        run_id: None,
        parent_run_id: None,
        parent_tool_call_id: None,
        cursor: None,
        event: e.envelope.event,
        payload: e.envelope.payload,
        created_at: e.envelope.created_at,
    };
    if body.tree {
        let mut cursor = crate::delegation::tree::TreeCursor::parse(&body.after_seq, &record.run_id)
            .map_err(|err| ApiError::invalid("after_seq", err.to_string()))?;
        let (run_id, uid) = (record.run_id.clone(), record.uid.clone());
        let tree = super::run_tree::tree_runs(store, record, &uid).await?;
        let page = super::run_tree::read_page(store, &tree, &mut cursor, body.limit).await?;
        let events = page
            .into_iter()
            .map(|e| EventItem {
                run_id: Some(e.event.envelope.run_id.clone()),
                parent_run_id: e.parent_run_id,
                parent_tool_call_id: e.parent_tool_call_id,
                cursor: Some(e.cursor),
                ..item(e.event)
            })
            .collect();
        let last_seq = cursor.encode();
        return Ok(Json(EventsAnswer { status: AnswerOk::Ok, run_id, after_seq: body.after_seq, last_seq, events }));
    }
    let events = store.read_events(&record.run_id, &body.after_seq, body.limit).await?;
    let last_seq = events.last().map(|e| e.seq.clone()).unwrap_or_else(|| body.after_seq.clone());
    let events = events.into_iter().map(item).collect();
    Ok(Json(EventsAnswer { status: AnswerOk::Ok, run_id: record.run_id, after_seq: body.after_seq, last_seq, events }))
}

/// `POST /api/tools/subagent_wait_any`: waits until the first of `run_ids` (runs this parent started)
/// ends, for `timeout_seconds` at most (0: answers at once), and answers it with its result.
#[utoipa::path(
    post,
    path = "/api/tools/subagent_wait_any",
    operation_id = "subagent_wait_any",
    tag = "tools",
    request_body = WaitAnyBody,
    responses(
        (status = 200, description = "the first run to end, or the runs still going with `wait_timed_out`", body = WaitAnyAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "a run is unknown, or invisible to the caller", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn subagent_wait_any(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<WaitAnyBody>,
) -> Result<Json<WaitAnyAnswer>, ApiError> {
    let store = runs(&state)?;
    if !(1..=MAX_WAIT_ANY_RUNS).contains(&body.run_ids.len()) {
        return Err(ApiError::invalid(
            "run_ids",
            format!("must name 1 to {MAX_WAIT_ANY_RUNS} runs (names {})", body.run_ids.len()),
        ));
    }
    let timeout = match body.timeout_seconds {
        Some(0) => Duration::ZERO,
        other => await_timeout(other)?,
    };
    let mut run_ids: Vec<String> = Vec::new();
    for run_id in &body.run_ids {
        let run = RunBody { parent: body.parent.clone(), run_id: run_id.clone(), timeout_seconds: None };
        owned(store, &caller, &run).await?;
        if !run_ids.contains(run_id) {
            run_ids.push(run_id.clone());
        }
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let watches: Vec<_> = run_ids.iter().map(|id| store.watch(id)).collect();
    loop {
        let now = tokio::time::Instant::now();
        // Taken before the look: an end after it wakes the wait at once.
        let changed: Vec<_> = watches.iter().map(|w| w.changed(deadline.saturating_duration_since(now))).collect();
        let mut ended = Vec::new();
        let mut pending = Vec::new();
        for run_id in &run_ids {
            match store.run_record(run_id).await? {
                Some(record) if record.status.is_terminal() => ended.push(RunEnded {
                    run_id: record.run_id,
                    status: record.status,
                    subagent_slug: record.agent_slug,
                }),
                _ => pending.push(run_id.clone()),
            }
        }
        if let Some(first) = ended.first() {
            let view = store
                .run_view(&first.run_id, PROGRESS_SCAN)
                .await?
                .ok_or_else(|| ApiError::NotFound("run vanished".into()))?;
            let run = Some(snapshot_of(&view));
            return Ok(Json(WaitAnyAnswer { status: AnswerOk::Ok, run, ended, pending, wait_timed_out: false }));
        }
        if now >= deadline {
            return Ok(Json(WaitAnyAnswer { status: AnswerOk::Ok, run: None, ended, pending, wait_timed_out: true }));
        }
        futures::future::select_all(changed).await;
    }
}

/// `POST /api/tools/task`: starts the subagent and blocks until it ends; `content` is what the parent's
/// model reads.
#[utoipa::path(
    post,
    path = "/api/tools/task",
    operation_id = "task",
    tag = "tools",
    request_body = StartBody,
    responses(
        (status = 200, description = "the subagent's answer, its error, or how to follow it", body = TaskAnswer),
        (status = 400, description = "malformed body or query", body = ErrorBody),
        (status = 401, description = "no or bad token", body = ErrorBody),
        (status = 404, description = "unknown, or invisible to the caller", body = ErrorBody),
        (status = 413, description = "body too large", body = ErrorBody),
        (status = 422, description = "breaks a rule; `field` names it", body = ErrorBody),
        (status = 409, description = "the parent run has ended: only a running run starts subagents", body = ErrorBody),
        (status = 429, description = "a limit is reached; `field` names its setting", body = ErrorBody, headers(("Retry-After" = u64, description = "seconds until a retry may succeed"))),
        (status = 503, description = "the run store or the Kubernetes API is unavailable", body = ErrorBody),
    ),
    security(("bearer" = [])),
)]
pub async fn task(
    State(state): State<FacadeState>,
    caller: ParentCaller,
    JsonBody(body): JsonBody<StartBody>,
) -> Result<Json<TaskAnswer>, ApiError> {
    let store = runs(&state)?.clone();
    // A bad wait is refused before anything starts.
    let timeout = await_timeout(body.timeout_seconds)?;
    let run_id = match start(&state, &caller, &body).await? {
        StartAnswer::Run(run) => run.run_id,
        StartAnswer::Busy(busy) => {
            let content = format!(
                "The subagent thread {:?} is busy with run {:?}; await it or start a new thread.",
                busy.thread_id, busy.active_run_id
            );
            return Ok(Json(TaskAnswer {
                content,
                run_id: busy.active_run_id,
                thread_id: busy.thread_id,
                status: "busy".into(),
                result: None,
            }));
        }
    };
    task_answer(&store, &run_id, timeout).await.map(Json)
}

/// Waits for the run `run_id` a `task` started, for `timeout` at most, and answers what `task` answers:
/// its final text, how it ended, or how to follow it when it is still going.
pub(crate) async fn task_answer(store: &Store, run_id: &str, timeout: Duration) -> Result<TaskAnswer, ApiError> {
    let run_id = run_id.to_string();
    let (record, timed_out) = wait(store, &run_id, timeout).await?;
    let output = store.run_result(&run_id).await?.map(|r| r.output);
    use crate::delegation::{TaskOutcome, task_content};
    let outcome = match (timed_out, record.status) {
        (true, _) => TaskOutcome::StillRunning(&run_id),
        (false, RunStatus::Completed) => TaskOutcome::Completed(output.as_deref()),
        (false, status) => TaskOutcome::Ended(status, record.error.as_deref()),
    };
    let content = task_content(&record.thread_id, outcome);
    Ok(TaskAnswer {
        content,
        run_id,
        thread_id: record.thread_id,
        status: record.status.as_str().into(),
        result: output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_outside_1_to_1800_seconds_are_refused_naming_the_field() {
        assert_eq!(await_timeout(None), Ok(Duration::from_secs(1800)));
        assert_eq!(await_timeout(Some(1)), Ok(Duration::from_secs(1)));
        for bad in [0, 1801, u64::MAX] {
            let Err(ApiError::Invalid { field, .. }) = await_timeout(Some(bad)) else { panic!("{bad} accepted") };
            assert_eq!(field, "timeout_seconds");
        }
    }

    #[test]
    fn stream_ids_are_two_unsigned_64_bit_numbers() {
        assert!(is_stream_id("0-0") && is_stream_id("1764460800000-3") && is_stream_id("18446744073709551615-0"));
        for bad in ["99999999999999999999-0", "1-", "-1", "1", "a-1", "1-1-1", "", " 1-1"] {
            assert!(!is_stream_id(bad), "{bad:?}");
        }
    }
}
