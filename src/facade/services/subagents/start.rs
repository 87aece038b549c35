//! Starting (or finding) a subagent run for a parent: `subagent_start`, and the start of `task`.

use kube::ResourceExt;

use crate::access::{Permission, allowed_subagents, permission};
use crate::delegation::wire::{Busy, BusyThread, Parent, StartAnswer, StartBody, StartStatus, StartedRun};
use crate::facade::http::auth::ParentCaller;
use crate::facade::http::error::ApiError;
use crate::facade::http::limits::run_limited;
use crate::facade::services::launch::check_startable;
use crate::facade::services::run_starts::{check_quotas, run_token};
use crate::facade::services::state::FacadeState;
use crate::resources::ParentRef;
use crate::run::record::start_key;
use crate::run::thread_id::{child_thread_id, is_child_thread_of, is_valid_id};
use crate::run::{Created, RunRecord, RunStatus};

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
pub async fn start(state: &FacadeState, caller: &ParentCaller, body: &StartBody) -> Result<StartAnswer, ApiError> {
    let store = state.store()?;
    let who = &caller.who;
    let mut parent = parent_of(caller, &body.parent)?;
    // A caller acts for itself. Without run credentials, the parent run it names is one of its own runs
    // of this system, or a parent outside the system under the caller's own id for that name: another
    // user's run of that name is never reached, and answers as an unused name does. Its thread and file
    // thread name folders of the caller's own (`users/<uid>/threads/<id>`), and are not claimed: another
    // user's thread of that name is neither reached nor revealed. And only a running run starts
    // children, whoever calls.
    if caller.run.is_none() {
        parent.run_id = super::parent_run_of(store, who, &parent.run_id).await?;
    }
    let file_thread = parent.file_thread_id.clone().unwrap_or_else(|| parent.thread_id.clone());
    // A child of a run of this system joins its parent's tree: the tree's root, and its budget.
    let mut inherited_budget = None;
    match store.run_record(&parent.run_id).await? {
        // Only a run made under an outside parent's id on purpose (an AgentRun so named) is another's.
        Some(record) if record.uid != who.uid => {
            return Err(ApiError::NotFound(format!("parent run {:?} does not exist", parent.run_id)));
        }
        Some(record) => {
            // A run calling with its own credentials is executing, whatever its record says yet: in a
            // cluster the controller records it `running` once the kubelet reports its pod so, which a
            // fast runner outpaces. Its call records it so (from `pending` only).
            let own = caller.run.as_ref().is_some_and(|run| run.run_id == record.run_id);
            let running = record.status == RunStatus::Running
                || (record.status == RunStatus::Pending
                    && own
                    && store.set_run_status(&record.run_id, RunStatus::Running, None).await?);
            if !running {
                return Err(ApiError::Conflict(format!(
                    "the parent run {} is {}; only a running run starts subagents",
                    record.run_id,
                    record.status.as_str()
                )));
            }
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
    // A subagent on a Model runs only for users the Model is shared with, as a main agent does.
    crate::facade::services::model_access::check_run_model(state, who, &subagent, None).await?;
    // The tree's budget. A parent outside the system starts a tree, with the smaller of the subagent's
    // own budget and the parent agent's: the parent agent's budget bounds what its delegations spend
    // whether or not its parent run is one of this system's.
    let own = |agent: &crate::resources::Agent| agent.spec.budget.as_ref().and_then(|b| b.max_tokens);
    let max_tokens = inherited_budget.unwrap_or_else(|| match (own(&subagent), own(parent_agent)) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    });
    check_quotas(state, &who.uid).await?;
    let (thread_id, continuing) = match &body.thread_id {
        Some(thread) if is_child_thread_of(thread, &parent.thread_id, &slug) => {
            // Only the caller's own child thread goes on; another's, or one never used, answers alike.
            if store.thread_owner(thread).await?.is_none_or(|owner| owner != who.uid) {
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
        // The delegating tool call's request span, when traces are exported: the child's goes under it.
        request: crate::run::RunRequest { traceparent: crate::telemetry::current_traceparent(), ..Default::default() }
            .summarized(&body.description),
        max_tokens,
        waiting: None,
        approvals: Vec::new(),
        ended_at: None,
        principal: who.principal.clone(),
    };
    check_startable(&record, &body.description, "description")?;
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
            let token = run_token(state, who, &record, &file_thread);
            launcher.launch(store.clone(), record.clone(), subagent.clone(), body.description.clone(), Some(token));
            state.metrics.run_started(&subagent, true);
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
        Created::Limited(limit) => Err(run_limited(limit, &state.limits.runs)),
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
