//! A run's event stream, its thread's messages and its result on Redis: appending an event (never after
//! the run's end), reading the stream from a cursor or its last events, and decoding a range of it.

use serde_json::Value;

use super::RedisStore;
use super::scripts::APPEND_EVENT_SCRIPT;
use crate::run::message::Message;
use crate::run::{Envelope, EventKind, RunResult, StoredEvent};
use crate::store::keys;
use crate::store::types::StoreError;

impl RedisStore {
    pub(in crate::store) async fn append_event(
        &self,
        run_id: &str,
        thread_id: &str,
        event: EventKind,
        payload: Value,
    ) -> Result<String, StoreError> {
        let envelope = Envelope::new(run_id, thread_id, event, payload, jiff::Timestamp::now().to_string());
        let data = serde_json::to_string(&envelope).expect("an envelope serializes");
        let mut connection = self.connection.clone();
        let seq: Option<String> = APPEND_EVENT_SCRIPT
            .key(keys::run_events(run_id))
            .key(keys::run_result(run_id))
            .arg(keys::EVENTS_MAX_LEN)
            .arg(event.as_str())
            .arg(data)
            .arg(keys::EVENTS_TTL_SECONDS)
            .arg(keys::run_notice(run_id))
            .invoke_async(&mut connection)
            .await?;
        seq.ok_or_else(|| StoreError::RunEnded { run_id: run_id.to_string() })
    }

    pub(in crate::store) async fn recent_events(
        &self,
        run_id: &str,
        count: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let key = keys::run_events(run_id);
        let reply: redis::streams::StreamRangeReply =
            self.read(redis::cmd("XREVRANGE").arg(&key).arg("+").arg("-").arg("COUNT").arg(count)).await?;
        let mut events = Self::decode_events(&key, reply)?;
        events.reverse();
        Ok(events)
    }

    pub(in crate::store) async fn read_events(
        &self,
        run_id: &str,
        after_seq: &str,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let key = keys::run_events(run_id);
        let reply: redis::streams::StreamRangeReply = self
            .read(redis::cmd("XRANGE").arg(&key).arg(format!("({after_seq}")).arg("+").arg("COUNT").arg(limit))
            .await?;
        Self::decode_events(&key, reply)
    }

    /// The events of a range reply of the stream `key`. Errors: [`StoreError::Corrupt`].
    pub(super) fn decode_events(
        key: &str,
        reply: redis::streams::StreamRangeReply,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        reply
            .ids
            .into_iter()
            .map(|entry| {
                let data: String = entry.get("data").unwrap_or_default();
                let envelope = serde_json::from_str(&data)
                    .map_err(|source| StoreError::Corrupt { key: key.to_string(), source })?;
                Ok(StoredEvent { seq: entry.id, envelope })
            })
            .collect()
    }

    pub(in crate::store) async fn thread_messages(&self, thread_id: &str) -> Result<Vec<Message>, StoreError> {
        let key = keys::thread_messages(thread_id);
        let items: Vec<String> = self.read(redis::cmd("LRANGE").arg(&key).arg(0).arg(-1)).await?;
        items
            .iter()
            .map(|item| serde_json::from_str(item).map_err(|source| StoreError::Corrupt { key: key.clone(), source }))
            .collect()
    }

    pub(in crate::store) async fn run_result(&self, run_id: &str) -> Result<Option<RunResult>, StoreError> {
        self.get_json(keys::run_result(run_id)).await
    }
}
