//! Runs paused for a person's approval ([`crate::run::approval`]): a running run becomes `waiting`,
//! with its checkpoint, its `interrupt` event and a keeper that holds it until its decisions are due,
//! in one step; a resume gives it the decisions and makes it `pending` again; its next runner takes
//! them once. With Redis the checkpoint is `yuxi:run:{id}:checkpoint` and the decisions
//! `yuxi:run:{id}:decisions`, each kept as JSON text (never rewritten by a script).

use std::time::Duration;

use crate::run::approval::{ApprovalRecord, Checkpoint, Decision, Waiting};
use crate::run::{Envelope, EventKind, RunRecord, RunResult, RunStatus};
use crate::store::types::StoreError;
use crate::store::{Store, keys};

fn checkpoint_key(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:checkpoint")
}

fn decisions_key(run_id: &str) -> String {
    format!("yuxi:run:{run_id}:decisions")
}

/// Pauses a run. `KEYS`: the record, the checkpoint, the event stream, the result, the keeper. `ARGV`:
/// the `waiting` JSON text, the checkpoint's JSON, the `interrupt` envelope's JSON, the stream's length
/// bound, how long the stream, the checkpoint and the keeper are kept (seconds), the keeper's holder.
/// Returns 1 when it paused the run, 0 when the run is not running (ended, cancelled, gone).
const PAUSE_RUN: &str = r"
    if redis.call('EXISTS', KEYS[4]) == 1 then return 0 end
    local raw = redis.call('GET', KEYS[1])
    if not raw then return 0 end
    local record = cjson.decode(raw)
    if record.status ~= 'running' then return 0 end
    record.status = 'waiting'
    record.waiting = ARGV[1]
    redis.call('SET', KEYS[1], cjson.encode(record), 'KEEPTTL')
    redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[5])
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[4], '*', 'event', 'interrupt', 'data', ARGV[3])
    redis.call('EXPIRE', KEYS[3], ARGV[5])
    redis.call('SET', KEYS[5], ARGV[6], 'EX', ARGV[5])
    redis.call('PUBLISH', (string.gsub(KEYS[3], ':events$', ':notice')), '1')
    return 1
    ";

/// Resumes a waiting run. `KEYS`: the record, the decisions, the keeper, the checkpoint. `ARGV`: the
/// decisions' JSON, how long they are kept (seconds), how long the keeper keeps the resumed run for its
/// next runner (seconds), the approval records of these decisions (a JSON list, appended to the
/// record's own, which is JSON text), how many records the record keeps. Returns 1 when it resumed the
/// run, 0 when the run is not waiting (or its checkpoint is gone).
const RESUME_RUN: &str = r"
    local raw = redis.call('GET', KEYS[1])
    if not raw then return 0 end
    local record = cjson.decode(raw)
    if record.status ~= 'waiting' or redis.call('EXISTS', KEYS[4]) == 0 then return 0 end
    record.status = 'pending'
    record.waiting = nil
    local kept = {}
    if type(record.approvals) == 'string' and record.approvals ~= '' then kept = cjson.decode(record.approvals)
    elseif type(record.approvals) == 'table' then kept = record.approvals end
    for _, entry in ipairs(cjson.decode(ARGV[4])) do table.insert(kept, entry) end
    while #kept > tonumber(ARGV[5]) do table.remove(kept, 1) end
    if #kept > 0 then record.approvals = cjson.encode(kept) else record.approvals = nil end
    redis.call('SET', KEYS[1], cjson.encode(record), 'KEEPTTL')
    redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
    redis.call('SET', KEYS[3], 'resumed', 'EX', ARGV[3])
    redis.call('PUBLISH', (string.gsub(KEYS[1], ':record$', ':notice')), '1')
    return 1
    ";

/// Takes a resumed run's checkpoint and decisions. `KEYS`: the checkpoint, the decisions. Returns both
/// texts (deleting them) when there are decisions, else nothing.
const TAKE_RESUMPTION: &str = r"
    local decisions = redis.call('GET', KEYS[2])
    if not decisions then return false end
    local checkpoint = redis.call('GET', KEYS[1])
    redis.call('DEL', KEYS[1], KEYS[2])
    if not checkpoint then return false end
    return {checkpoint, decisions}
    ";

static PAUSE_RUN_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(PAUSE_RUN));
static RESUME_RUN_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(RESUME_RUN));
static TAKE_RESUMPTION_SCRIPT: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(TAKE_RESUMPTION));

/// Who keeps a paused run while it waits.
const WAITING_HOLDER: &str = "waiting-for-approval";

fn corrupt(key: String, source: serde_json::Error) -> StoreError {
    StoreError::Corrupt { key, source }
}

/// Approvals.
impl Store {
    /// Pauses the running run `run_id` for a person, in one step: its record `waiting` with `waiting`,
    /// its `checkpoint` kept, the `interrupt` event (`payload`) written, and the run kept (not
    /// abandoned, its events not expired) for `keep`. Returns `false`, having written nothing, when the
    /// run is not running (cancelled meanwhile, ended, gone).
    pub async fn pause_run(
        &self,
        run_id: &str,
        thread_id: &str,
        checkpoint: &Checkpoint,
        waiting: &Waiting,
        payload: serde_json::Value,
        keep: Duration,
    ) -> Result<bool, StoreError> {
        let envelope =
            Envelope::new(run_id, thread_id, EventKind::Interrupt, payload, jiff::Timestamp::now().to_string());
        match self {
            Store::Memory(memory) => Ok(memory.pause_run(run_id, checkpoint.clone(), waiting.clone(), envelope, keep)),
            Store::Redis(redis) => {
                let paused: i64 = PAUSE_RUN_SCRIPT
                    .key(keys::run_record(run_id))
                    .key(checkpoint_key(run_id))
                    .key(keys::run_events(run_id))
                    .key(keys::run_result(run_id))
                    .key(keys::run_keeper(run_id))
                    .arg(serde_json::to_string(waiting).expect("a waiting serializes"))
                    .arg(serde_json::to_string(checkpoint).expect("a checkpoint serializes"))
                    .arg(serde_json::to_string(&envelope).expect("an envelope serializes"))
                    .arg(keys::EVENTS_MAX_LEN)
                    .arg(keep.as_secs().max(keys::EVENTS_TTL_SECONDS as u64))
                    .arg(WAITING_HOLDER)
                    .invoke_async(&mut redis.connection())
                    .await?;
                Ok(paused == 1)
            }
        }
    }

    /// The checkpoint of a paused run (`None` for a run that is not paused, or that was resumed and
    /// taken).
    pub async fn run_checkpoint(&self, run_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.run_checkpoint(run_id)),
            Store::Redis(redis) => {
                let text: Option<String> = redis.read(redis::cmd("GET").arg(checkpoint_key(run_id))).await?;
                text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(checkpoint_key(run_id), e))).transpose()
            }
        }
    }

    /// Resumes the waiting run `run_id` with `decisions`, their records `decided` appended to the
    /// record's approvals in the same step (bounded by [`crate::run::approval::MAX_APPROVALS_KEPT`], the
    /// oldest going first): it becomes `pending` for its next runner, and
    /// its keeper keeps it for [`keys::START_GRACE_SECONDS`], as a new run is kept, until the launcher
    /// that starts it again keeps it (without that, a sweep between the resume and the launch would end
    /// the run as abandoned). Returns `false`, having written nothing, when it is not waiting.
    pub async fn resume_run(
        &self,
        run_id: &str,
        decisions: &[Decision],
        decided: &[ApprovalRecord],
    ) -> Result<bool, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.resume_run(run_id, decisions.to_vec(), decided)),
            Store::Redis(redis) => {
                let resumed: i64 = RESUME_RUN_SCRIPT
                    .key(keys::run_record(run_id))
                    .key(decisions_key(run_id))
                    .key(keys::run_keeper(run_id))
                    .key(checkpoint_key(run_id))
                    .arg(serde_json::to_string(decisions).expect("decisions serialize"))
                    .arg(keys::STATE_TTL_SECONDS)
                    .arg(keys::START_GRACE_SECONDS)
                    .arg(serde_json::to_string(decided).expect("approval records serialize"))
                    .arg(crate::run::approval::MAX_APPROVALS_KEPT)
                    .invoke_async(&mut redis.connection())
                    .await?;
                Ok(resumed == 1)
            }
        }
    }

    /// Takes, once, the checkpoint and decisions of a resumed run: what its runner goes on from.
    /// `None` for a run that was not resumed.
    pub async fn take_resumption(&self, run_id: &str) -> Result<Option<(Checkpoint, Vec<Decision>)>, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.take_resumption(run_id)),
            Store::Redis(redis) => {
                let texts: Option<(String, String)> = TAKE_RESUMPTION_SCRIPT
                    .key(checkpoint_key(run_id))
                    .key(decisions_key(run_id))
                    .invoke_async(&mut redis.connection())
                    .await?;
                let Some((checkpoint, decisions)) = texts else { return Ok(None) };
                let checkpoint = serde_json::from_str(&checkpoint).map_err(|e| corrupt(checkpoint_key(run_id), e))?;
                let decisions = serde_json::from_str(&decisions).map_err(|e| corrupt(decisions_key(run_id), e))?;
                Ok(Some((checkpoint, decisions)))
            }
        }
    }

    /// Ends the waiting run `run_id` (a cancel, or its decisions overdue) `status`, with `error` and
    /// `reason`, keeping what it said: its checkpoint's messages (the turn whose calls wait, each call
    /// that did not run answered so) are appended to its thread in the same step as its result and its
    /// `end` ([`Store::finish_run`]), as a runner ends a running run. A run whose checkpoint is gone
    /// (resumed meanwhile) is ended as [`Store::end_run`] ends a run. Returns whether it ended the run.
    pub async fn end_waiting(
        &self,
        run_id: &str,
        status: RunStatus,
        error: Option<&str>,
        reason: Option<&str>,
    ) -> Result<bool, StoreError> {
        let Some(record) = self.run_record(run_id).await? else { return Ok(false) };
        let Some(checkpoint) = self.run_checkpoint(run_id).await? else {
            return self.end(run_id, status, error, reason, false).await;
        };
        let mut messages = checkpoint.added;
        crate::run::message::answer_open_calls(&mut messages, status);
        let result = RunResult {
            status,
            output: String::new(),
            error: error.map(String::from),
            agent_slug: record.agent_slug.clone(),
            run_id: record.run_id.clone(),
            thread_id: record.thread_id.clone(),
            token_usage: checkpoint.usage,
            reason: reason.map(String::from),
            tree_token_usage: None,
            tree_cost: Vec::new(),
        };
        self.finish_run(run_id, &record.thread_id, &messages, &result).await
    }

    /// Ends every waiting run whose decisions are overdue at `now`: `failed` with reason
    /// `ApprovalTimeout`, keeping what it said ([`Store::end_waiting`]). Returns how many it ended.
    pub async fn expire_waiting(&self, now: jiff::Timestamp) -> Result<usize, StoreError> {
        let mut ended = 0;
        for run_id in self.unfinished_runs().await? {
            let Some(record) = self.run_record(&run_id).await? else { continue };
            let overdue = record.waiting.as_ref().is_some_and(|w| w.overdue(now));
            if record.status == RunStatus::Waiting && overdue && self.expire_waiting_run(&record).await? {
                ended += 1;
            }
        }
        Ok(ended)
    }

    /// Ends the waiting run `record` because its decisions are overdue: `failed` with reason
    /// `ApprovalTimeout` ([`Store::end_waiting`]); the sweeper's step, and a late decision's. Returns
    /// whether it ended the run (not when something else ended or resumed it first).
    pub async fn expire_waiting_run(&self, record: &RunRecord) -> Result<bool, StoreError> {
        let error = "no decision came before the approval's time-out (approvalTimeoutSeconds)";
        let ended = self
            .end_waiting(&record.run_id, RunStatus::Failed, Some(error), Some(crate::run::approval::APPROVAL_TIMEOUT))
            .await?;
        if ended {
            tracing::info!(run_id = %record.run_id, "ended a run whose approval timed out");
        }
        Ok(ended)
    }
}
