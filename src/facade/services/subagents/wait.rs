//! Waiting for subagent runs: `subagent_await` ([`await_run`]), `subagent_wait_any` ([`wait_any`]) and
//! `task` ([`task`], which starts the run first and answers what the parent's model reads).

use std::time::Duration;

use super::start::start;
use super::{owned, snapshot, snapshot_of};
use crate::delegation::progress::PROGRESS_SCAN;
use crate::delegation::wire::{
    AnswerOk, RunBody, RunEnded, Snapshot, StartAnswer, StartBody, TaskAnswer, WaitAnyAnswer, WaitAnyBody,
};
use crate::delegation::{MAX_AWAIT_SECONDS, MAX_WAIT_ANY_RUNS};
use crate::facade::http::auth::ParentCaller;
use crate::facade::http::error::ApiError;
use crate::facade::services::state::FacadeState;
use crate::run::{RunRecord, RunStatus};
use crate::store::Store;

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
pub fn await_timeout(requested: Option<u64>) -> Result<Duration, ApiError> {
    match requested {
        None => Ok(Duration::from_secs(MAX_AWAIT_SECONDS)),
        Some(seconds) if (1..=MAX_AWAIT_SECONDS).contains(&seconds) => Ok(Duration::from_secs(seconds)),
        Some(seconds) => {
            Err(ApiError::invalid("timeout_seconds", format!("must be within 1..{MAX_AWAIT_SECONDS} (is {seconds})")))
        }
    }
}

/// `subagent_await`: the terminal result, or the current snapshot with `wait_timed_out: true`.
pub async fn await_run(state: &FacadeState, caller: &ParentCaller, body: &RunBody) -> Result<Snapshot, ApiError> {
    let store = state.store()?;
    let timeout = await_timeout(body.timeout_seconds)?;
    let record = owned(store, caller, body).await?.record;
    let (record, timed_out) = wait(store, &record.run_id, timeout).await?;
    let mut answer = snapshot(store, &record).await?;
    if timed_out {
        answer.wait_timed_out = Some(true);
        answer.message = Some("the run is still going; await it again or read its status".into());
    }
    Ok(answer)
}

/// Checks that each of `run_ids` is a run this parent started for this user, before anything of them is
/// watched or told (an MCP call's progress notifications). Errors: 404 for any other, exactly as for a
/// run that does not exist; 503 when the run store cannot answer.
pub async fn check_owned(
    state: &FacadeState,
    caller: &ParentCaller,
    parent: &crate::delegation::wire::Parent,
    run_ids: &[String],
) -> Result<(), ApiError> {
    let store = state.store()?;
    for run_id in run_ids {
        let run = RunBody { parent: parent.clone(), run_id: run_id.clone(), timeout_seconds: None };
        owned(store, caller, &run).await?;
    }
    Ok(())
}

/// `subagent_wait_any`: waits until the first of `run_ids` (runs this parent started) ends, for
/// `timeout_seconds` at most (0: answers at once), and answers it with its result.
pub async fn wait_any(
    state: &FacadeState,
    caller: &ParentCaller,
    body: &WaitAnyBody,
) -> Result<WaitAnyAnswer, ApiError> {
    let store = state.store()?;
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
        owned(store, caller, &run).await?;
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
            return Ok(WaitAnyAnswer { status: AnswerOk::Ok, run, ended, pending, wait_timed_out: false });
        }
        if now >= deadline {
            return Ok(WaitAnyAnswer { status: AnswerOk::Ok, run: None, ended, pending, wait_timed_out: true });
        }
        futures::future::select_all(changed).await;
    }
}

/// `task`: starts the subagent and waits until it ends; `content` is what the parent's model reads.
pub async fn task(state: &FacadeState, caller: &ParentCaller, body: &StartBody) -> Result<TaskAnswer, ApiError> {
    let store = state.store()?.clone();
    // A bad wait is refused before anything starts.
    let timeout = await_timeout(body.timeout_seconds)?;
    let run_id = match start(state, caller, body).await? {
        StartAnswer::Run(run) => run.run_id,
        StartAnswer::Busy(busy) => {
            let content = format!(
                "The subagent thread {:?} is busy with run {:?}; await it or start a new thread.",
                busy.thread_id, busy.active_run_id
            );
            return Ok(TaskAnswer {
                content,
                run_id: busy.active_run_id,
                thread_id: busy.thread_id,
                status: "busy".into(),
                result: None,
            });
        }
    };
    task_answer(&store, &run_id, timeout).await
}

/// Waits for the run `run_id` a `task` started, for `timeout` at most, and answers what `task` answers:
/// its final text, how it ended, or how to follow it when it is still going.
pub async fn task_answer(store: &Store, run_id: &str, timeout: Duration) -> Result<TaskAnswer, ApiError> {
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
}
