//! The subagent tools' logic (SEED-subagents.md "同步调用与异步调用"), behind both `/api/tools` and
//! `/mcp`: the tools an agent may mount ([`list_tools`]), a run's snapshot ([`status`], [`snapshot_of`]),
//! its events ([`events`]) and its cancel ([`cancel`]); starting a subagent run is in [`start`], waiting
//! for one ([`wait::await_run`], [`wait::wait_any`], [`wait::task`]) in [`wait`].
//!
//! Every body names the calling parent. A run-id tool answers a run created by another parent run, or for
//! another user, exactly as a run that does not exist. The children name this module; it names neither.

pub mod start;
pub mod wait;

use kube::ResourceExt;
use serde_json::Value;

use super::state::FacadeState;
use crate::access::{Identity, Permission, allowed_subagents, permission};
use crate::delegation::MAX_EVENTS_LIMIT;
use crate::delegation::progress::{PROGRESS_SCAN, summarize};
use crate::delegation::wire::{
    AnswerOk, CancelAnswer, EventItem, EventsAnswer, EventsBody, RunBody, Snapshot, ToolsAnswer, is_stream_id,
};
use crate::facade::http::auth::ParentCaller;
use crate::facade::http::error::ApiError;
use crate::run::RunRecord;
use crate::run::thread_id::is_valid_id;
use crate::store::{RunView, Store};

/// The subagent tools' schemas and the prompt section listing the subagents `agent` may call for `who`,
/// as `GET /api/tools?agent=<slug>` answers them. A subagent, or an agent with no allowed subagent, gets
/// no tools. Errors: 404 for an agent `who` may not read.
pub async fn list_tools(state: &FacadeState, who: &Identity, agent: String) -> Result<ToolsAnswer, ApiError> {
    let all = state.agents.all().await?;
    let found = all
        .iter()
        .find(|a| a.name_any() == agent && permission(who, a) >= Permission::Read)
        .ok_or_else(|| ApiError::NotFound(format!("agent {agent:?} does not exist")))?;
    let allowed = allowed_subagents(found, &all, who);
    let prompt = crate::delegation::subagent_prompt(&allowed);
    let tools = if prompt.is_some() { crate::delegation::tool_schemas() } else { Vec::new() };
    let subagents: Vec<String> = allowed.iter().map(|a| a.name_any()).collect();
    Ok(ToolsAnswer { agent, subagents, tools, prompt })
}

/// The run (record, result and last events, in one read), when it was created by this parent run for this
/// user; otherwise not found, whether it exists or not.
async fn owned(store: &Store, caller: &ParentCaller, body: &RunBody) -> Result<RunView, ApiError> {
    let who = &caller.who;
    let parent_run = match &caller.run {
        Some(run) => run.run_id.clone(),
        None => {
            let named =
                body.parent.run_id.as_deref().ok_or_else(|| ApiError::invalid("parent.run_id", "is required"))?;
            parent_run_of(store, who, named).await?
        }
    };
    let missing = || ApiError::NotFound("run does not exist or does not belong to the current parent run".into());
    if !is_valid_id(&body.run_id) {
        return Err(missing());
    }
    let view = store.run_view(&body.run_id, PROGRESS_SCAN).await?.ok_or_else(missing)?;
    let record = &view.record;
    let mine = record.uid == who.uid && record.parent.as_ref().is_some_and(|p| p.run_id == parent_run);
    if mine { Ok(view) } else { Err(missing()) }
}

/// The run id a caller without run credentials means by the parent run `named`: `named` when it is one
/// of the caller's own runs of this system, else the caller's own run id for a parent outside the
/// system ([`crate::delegation::outside_parent_run_id`]), whether another user's run has the name or
/// none has.
pub async fn parent_run_of(store: &Store, who: &Identity, named: &str) -> Result<String, ApiError> {
    if store.run_record(named).await?.is_some_and(|record| record.uid == who.uid) {
        Ok(named.to_string())
    } else {
        Ok(crate::delegation::outside_parent_run_id(&who.uid, named))
    }
}

/// The run as it is now, read in one round trip.
async fn snapshot(store: &Store, record: &RunRecord) -> Result<Snapshot, ApiError> {
    match store.run_view(&record.run_id, PROGRESS_SCAN).await? {
        Some(view) => Ok(snapshot_of(&view)),
        None => Err(ApiError::NotFound("run vanished".into())),
    }
}

/// What `subagent_status` answers for `view`.
pub fn snapshot_of(view: &RunView) -> Snapshot {
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

/// `subagent_status`: the run and its latest messages.
pub async fn status(state: &FacadeState, caller: &ParentCaller, body: &RunBody) -> Result<Snapshot, ApiError> {
    let store = state.store()?;
    Ok(snapshot_of(&owned(store, caller, body).await?))
}

/// `subagent_cancel`: the run after the cancel.
pub async fn cancel(state: &FacadeState, caller: &ParentCaller, body: &RunBody) -> Result<CancelAnswer, ApiError> {
    let store = state.store()?;
    let record = owned(store, caller, body).await?.record;
    let record = store.cancel_run(&record.run_id).await?.unwrap_or(record);
    Ok(CancelAnswer::of(record))
}

/// `subagent_events`: up to `limit` (1..50) events after `after_seq`, in stream order (of the whole run
/// tree with `tree`).
pub async fn events(state: &FacadeState, caller: &ParentCaller, body: EventsBody) -> Result<EventsAnswer, ApiError> {
    let store = state.store()?;
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
        caller,
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
        return Ok(EventsAnswer { status: AnswerOk::Ok, run_id, after_seq: body.after_seq, last_seq, events });
    }
    let events = store.read_events(&record.run_id, &body.after_seq, body.limit).await?;
    let last_seq = events.last().map(|e| e.seq.clone()).unwrap_or_else(|| body.after_seq.clone());
    let events = events.into_iter().map(item).collect();
    Ok(EventsAnswer { status: AnswerOk::Ok, run_id: record.run_id, after_seq: body.after_seq, last_seq, events })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_ids_are_two_unsigned_64_bit_numbers() {
        assert!(is_stream_id("0-0") && is_stream_id("1764460800000-3") && is_stream_id("18446744073709551615-0"));
        for bad in ["99999999999999999999-0", "1-", "-1", "1", "a-1", "1-1-1", "", " 1-1"] {
            assert!(!is_stream_id(bad), "{bad:?}");
        }
    }
}
