//! A run's life on Redis: its runner's lease, its creation, its thread's owner, its record and status
//! view, its end (whoever ends it, and as its runner reports it), its keeper, the unfinished runs, its
//! status and its children.

use std::time::Duration;

use redis::AsyncCommands;

use super::scripts::{
    CREATE_RUN_SCRIPT, END_RUN_SCRIPT, FINISH_RUN_SCRIPT, RELEASE_LEASE, RENEW_LEASE, SET_RUN_STATUS, terminal_list,
};
use super::{RedisStore, idempotent};
use crate::run::message::Message;
use crate::run::{Created, Envelope, RunLimit, RunLimits, RunRecord, RunResult, RunStatus};
use crate::store::keys;
use crate::store::run_list::created_ms;
use crate::store::types::{RunView, StoreError};

impl RedisStore {
    pub(in crate::store) async fn hold_run_lease(
        &self,
        run_id: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let key = keys::run_lease(run_id);
        let mut connection = self.connection.clone();
        let millis = ttl.as_millis().max(1) as u64;
        let taken: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(holder)
            .arg("NX")
            .arg("PX")
            .arg(millis)
            .query_async(&mut connection)
            .await?;
        if taken.is_some() {
            return Ok(true);
        }
        // Renew only our own lease: compare and extend in one step.
        let renewed: i64 =
            redis::Script::new(RENEW_LEASE).key(&key).arg(holder).arg(millis).invoke_async(&mut connection).await?;
        Ok(renewed == 1)
    }

    pub(in crate::store) async fn release_run_lease(&self, run_id: &str, holder: &str) -> Result<(), StoreError> {
        let mut connection = self.connection.clone();
        redis::Script::new(RELEASE_LEASE)
            .key(keys::run_lease(run_id))
            .arg(holder)
            .invoke_async::<i64>(&mut connection)
            .await?;
        Ok(())
    }

    pub(in crate::store) async fn create_run(
        &self,
        record: &RunRecord,
        start_key: Option<&str>,
        limits: RunLimits,
    ) -> Result<Created, StoreError> {
        let mut connection = self.connection.clone();
        let (outcome, run_id): (String, String) = CREATE_RUN_SCRIPT
            .key(keys::run_record(&record.run_id))
            .key(keys::thread_active_run(&record.thread_id))
            .key(start_key.map(keys::start).unwrap_or_default())
            .arg(&record.run_id)
            .arg(serde_json::to_string(record).expect("a record serializes"))
            .arg(keys::START_TTL_SECONDS)
            .key(keys::thread_owner(&record.thread_id))
            .arg(&record.uid)
            .key(record.parent.as_ref().map(|p| keys::run_children(&p.run_id)).unwrap_or_default())
            .arg(keys::RESULT_TTL_SECONDS)
            .key(keys::user_active_runs(&record.uid))
            .key(keys::ACTIVE_RUNS)
            .arg(limits.per_user)
            .arg(limits.total)
            .arg(keys::STATE_TTL_SECONDS)
            .arg(terminal_list())
            .key(keys::run_keeper(&record.run_id))
            .arg(keys::START_GRACE_SECONDS)
            .key(keys::user_runs(&record.uid))
            .key(keys::ALL_RUNS)
            .arg(created_ms(record))
            .arg(keys::MAX_USER_RUNS_LISTED)
            .arg(keys::MAX_RUNS_LISTED)
            .invoke_async(&mut connection)
            .await?;
        Ok(match outcome.as_str() {
            "existing" => Created::Existing(run_id),
            "busy" => Created::Busy(run_id),
            "limited" if run_id == "user" => Created::Limited(RunLimit::PerUser),
            "limited" => Created::Limited(RunLimit::Total),
            _ => Created::Started,
        })
    }

    pub(in crate::store) async fn thread_owner(&self, thread_id: &str) -> Result<Option<String>, StoreError> {
        self.read(redis::cmd("GET").arg(keys::thread_owner(thread_id))).await
    }

    pub(in crate::store) async fn claim_thread(&self, thread_id: &str, uid: &str) -> Result<bool, StoreError> {
        let mut connection = self.connection.clone();
        let key = keys::thread_owner(thread_id);
        let _: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(uid)
            .arg("NX")
            .arg("EX")
            .arg(keys::STATE_TTL_SECONDS)
            .query_async(&mut connection)
            .await?;
        let owner: Option<String> = connection.get(&key).await?;
        Ok(owner.as_deref() == Some(uid))
    }

    pub(in crate::store) async fn run_view(&self, run_id: &str, recent: usize) -> Result<Option<RunView>, StoreError> {
        let cached = (run_id.to_string(), recent);
        if let Some(view) = self.ended_views.get(&cached) {
            return Ok(Some(view));
        }
        let (record_key, result_key, events_key) =
            (keys::run_record(run_id), keys::run_result(run_id), keys::run_events(run_id));
        let mut pipe = redis::pipe();
        pipe.get(&record_key)
            .get(&result_key)
            .cmd("XREVRANGE")
            .arg(&events_key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(recent);
        let pipe = &pipe;
        let (record, result, events): (Option<String>, Option<String>, redis::streams::StreamRangeReply) =
            idempotent(|| {
                let mut connection = self.connection.clone();
                async move { Ok(pipe.query_async(&mut connection).await?) }
            })
            .await?;
        fn decode<T: serde::de::DeserializeOwned>(key: &str, text: Option<String>) -> Result<Option<T>, StoreError> {
            text.map(|t| {
                serde_json::from_str(&t).map_err(|source| StoreError::Corrupt { key: key.to_string(), source })
            })
            .transpose()
        }
        let Some(record) = decode(&record_key, record)? else { return Ok(None) };
        let result = decode(&result_key, result)?;
        let mut recent = Self::decode_events(&events_key, events)?;
        recent.reverse();
        let view = RunView { record, result, recent };
        // Only a view with its result and its `end` is whole: a run's end writes them in the same step.
        if view.record.status.is_terminal()
            && view.result.is_some()
            && view.recent.last().is_some_and(|e| e.envelope.event == crate::run::EventKind::End)
        {
            self.ended_views.insert(cached, view.clone());
        }
        Ok(Some(view))
    }

    pub(in crate::store) async fn run_record(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.get_json(keys::run_record(run_id)).await
    }

    pub(in crate::store) async fn end_run(
        &self,
        record: &RunRecord,
        status: RunStatus,
        error: Option<&str>,
        result: &RunResult,
        end: &Envelope,
        only_if_abandoned: bool,
    ) -> Result<bool, StoreError> {
        let mut invocation = END_RUN_SCRIPT.key(keys::run_record(&record.run_id));
        invocation
            .key(keys::thread_active_run(&record.thread_id))
            .key(keys::run_result(&record.run_id))
            .key(keys::run_events(&record.run_id))
            .key(keys::run_lease(&record.run_id))
            .key(keys::run_keeper(&record.run_id))
            .arg(status.as_str())
            .arg(error.unwrap_or_default())
            .arg(serde_json::to_string(result).expect("a result serializes"))
            .arg(serde_json::to_string(end).expect("an envelope serializes"))
            .arg(keys::EVENTS_MAX_LEN)
            .arg(keys::EVENTS_TTL_SECONDS)
            .arg(keys::RESULT_TTL_SECONDS)
            .arg(terminal_list())
            .arg(if only_if_abandoned { "1" } else { "0" });
        self.ends(&invocation).await
    }

    /// Ends the run as its runner reports it, in one step ([`FINISH_RUN`](super::scripts::FINISH_RUN)).
    #[allow(clippy::too_many_arguments)]
    pub(in crate::store) async fn finish_run(
        &self,
        run_id: &str,
        thread_id: &str,
        new_messages: &[Message],
        result: &RunResult,
        record_status: RunStatus,
        error_event: Option<&Envelope>,
        end: &Envelope,
    ) -> Result<bool, StoreError> {
        let mut invocation = FINISH_RUN_SCRIPT.key(keys::run_record(run_id));
        invocation
            .key(keys::thread_active_run(thread_id))
            .key(keys::run_result(run_id))
            .key(keys::run_events(run_id))
            .key(keys::thread_messages(thread_id))
            .key(keys::run_keeper(run_id))
            .arg(record_status.as_str())
            .arg(result.error.as_deref().unwrap_or_default())
            .arg(serde_json::to_string(result).expect("a result serializes"))
            .arg(error_event.map(|e| serde_json::to_string(e).expect("an envelope serializes")).unwrap_or_default())
            .arg(serde_json::to_string(end).expect("an envelope serializes"))
            .arg(keys::EVENTS_MAX_LEN)
            .arg(keys::EVENTS_TTL_SECONDS)
            .arg(keys::RESULT_TTL_SECONDS)
            .arg(keys::MAX_THREAD_MESSAGES)
            .arg(keys::STATE_TTL_SECONDS)
            .arg(terminal_list());
        for message in new_messages {
            invocation.arg(serde_json::to_string(message).expect("a message serializes"));
        }
        self.ends(&invocation).await
    }

    /// Runs one of the end scripts, which answer 1 when they ended the run. Sent again after a transient
    /// failure ([`idempotent`]): a second try after a lost answer finds the run ended and writes nothing.
    async fn ends(&self, invocation: &redis::ScriptInvocation<'_>) -> Result<bool, StoreError> {
        let ended: i64 = idempotent(|| {
            let mut connection = self.connection.clone();
            async move { Ok(invocation.invoke_async(&mut connection).await?) }
        })
        .await?;
        Ok(ended == 1)
    }

    pub(in crate::store) async fn keep_run(&self, run_id: &str, holder: &str, ttl: Duration) -> Result<(), StoreError> {
        let millis = ttl.as_millis().max(1) as u64;
        idempotent(|| {
            let mut connection = self.connection.clone();
            async move {
                let () = connection.pset_ex(keys::run_keeper(run_id), holder, millis).await?;
                Ok(())
            }
        })
        .await
    }

    pub(in crate::store) async fn unfinished_runs(&self) -> Result<Vec<String>, StoreError> {
        idempotent(|| {
            let mut connection = self.connection.clone();
            async move { Ok(connection.smembers(keys::ACTIVE_RUNS).await?) }
        })
        .await
    }

    pub(in crate::store) async fn set_run_status(
        &self,
        run_id: &str,
        status: RunStatus,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        let Some(record) = self.run_record(run_id).await? else { return Ok(false) };
        let mut connection = self.connection.clone();
        let script = redis::Script::new(SET_RUN_STATUS);
        let mut invocation = script.key(keys::run_record(run_id));
        invocation
            .key(keys::thread_active_run(&record.thread_id))
            .arg(status.as_str())
            .arg(error.unwrap_or_default())
            .arg(if status.is_terminal() { "1" } else { "0" })
            // To `running` only from `pending`: a cancel asked for while the run was starting stays asked for.
            .arg(if status == RunStatus::Running { RunStatus::Pending.as_str() } else { "" });
        for terminal in RunStatus::TERMINAL {
            invocation.arg(terminal.as_str());
        }
        let changed: i64 = invocation.invoke_async(&mut connection).await?;
        Ok(changed == 1)
    }

    pub(in crate::store) async fn children(&self, parent_run_id: &str) -> Result<Vec<String>, StoreError> {
        self.read(redis::cmd("SMEMBERS").arg(keys::run_children(parent_run_id))).await
    }
}
