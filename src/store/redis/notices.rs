//! What wakes and stops a run on Redis: the one pattern subscription that turns run notices into
//! wake-ups of this process's watches ([`crate::store::notices`]), the steer and cancel requests, and
//! waiting for a cancel (through that subscription, or, for a runner, its own run's cancel channel).

use std::time::Duration;

use futures::StreamExt;

use super::{Listens, RedisStore};
use crate::store::keys;
use crate::store::notices::{Notices, RunWatch};
use crate::store::types::StoreError;

/// Subscribes to every run's notice channel ([`keys::RUN_NOTICE_PATTERN`]) on a connection of its own,
/// and wakes the watches of each run a message names. A subscription that breaks is made again with
/// backoff (100 ms to 5 s); every watch is woken then, as notices may have been missed meanwhile.
async fn serve_notices(client: redis::Client, notices: Notices) {
    let mut delay = Duration::from_millis(100);
    loop {
        match client.get_async_pubsub().await {
            Ok(mut pubsub) => match pubsub.psubscribe(keys::RUN_NOTICE_PATTERN).await {
                Ok(()) => {
                    delay = Duration::from_millis(100);
                    notices.wake_all();
                    let mut messages = pubsub.on_message();
                    while let Some(message) = messages.next().await {
                        if let Some(run_id) = keys::run_of_notice(message.get_channel_name()) {
                            notices.wake(run_id);
                        }
                    }
                    tracing::warn!("the subscription to run notices broke; subscribing again");
                }
                Err(err) => tracing::warn!(error = %err, "cannot subscribe to run notices"),
            },
            Err(err) => tracing::debug!(error = %err, "cannot open a connection for run notices"),
        }
        notices.wake_all();
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(5));
    }
}

impl RedisStore {
    /// A watch of the run, woken by its notices ([`crate::store::notices`]); the first watch of this store
    /// starts its one pattern subscription.
    pub(in crate::store) fn watch(&self, run_id: &str) -> RunWatch {
        self.hub.get_or_init(|| {
            tokio::spawn(serve_notices(self.client.clone(), self.notices.clone()));
        });
        self.notices.watch(run_id)
    }

    pub(in crate::store) async fn request_steer(&self, run_id: &str) -> Result<(), StoreError> {
        let mut pipe = redis::pipe();
        pipe.set_ex(keys::run_steer(run_id), "1", keys::CANCEL_TTL_SECONDS as u64)
            .ignore()
            .publish(keys::run_notice(run_id), "1")
            .ignore();
        self.write(&pipe).await
    }

    pub(in crate::store) async fn request_cancel(&self, run_id: &str) -> Result<(), StoreError> {
        let key = keys::run_cancel(run_id);
        let mut connection = self.connection.clone();
        redis::pipe()
            .set_ex(&key, "1", keys::CANCEL_TTL_SECONDS as u64)
            .ignore()
            .publish(&key, "cancel")
            .ignore()
            .publish(keys::run_notice(run_id), "1")
            .ignore()
            .query_async::<()>(&mut connection)
            .await?;
        Ok(())
    }

    pub(in crate::store) async fn is_cancel_requested(&self, run_id: &str) -> Result<bool, StoreError> {
        self.read(redis::cmd("EXISTS").arg(keys::run_cancel(run_id))).await
    }

    /// Resolves when a cancel is requested for the run: at once on its notice (through this store's one
    /// subscription, see [`RedisStore::watch`]), and by checking the key every `poll` in case a notice
    /// was missed.
    pub(in crate::store) async fn cancelled(&self, run_id: &str, poll: Duration) {
        if self.listens == Listens::OwnCancels {
            return self.cancel_announced(run_id, poll).await;
        }
        let watch = self.watch(run_id);
        loop {
            let changed = watch.changed(poll);
            if self.is_cancel_requested(run_id).await.unwrap_or(false) {
                return;
            }
            changed.await;
        }
    }

    /// [`RedisStore::cancelled`] for a process that listens to its own cancels only: a subscription to
    /// the run's cancel channel, on a connection of its own while it waits, and a look at the key every
    /// `poll` (and after the subscription breaks, when one is made again).
    async fn cancel_announced(&self, run_id: &str, poll: Duration) {
        let channel = keys::run_cancel(run_id);
        loop {
            let mut subscription = match self.client.get_async_pubsub().await {
                Ok(mut pubsub) => match pubsub.subscribe(&channel).await {
                    Ok(()) => Some(pubsub),
                    Err(err) => {
                        tracing::debug!(run_id, error = %err, "cannot subscribe to the run's cancel");
                        None
                    }
                },
                Err(err) => {
                    tracing::debug!(run_id, error = %err, "cannot open a connection for the run's cancel");
                    None
                }
            };
            loop {
                if self.is_cancel_requested(run_id).await.unwrap_or(false) {
                    return;
                }
                let Some(pubsub) = subscription.as_mut() else {
                    tokio::time::sleep(poll).await;
                    break;
                };
                match tokio::time::timeout(poll, pubsub.on_message().next()).await {
                    Ok(Some(_)) | Err(_) => {}
                    // The subscription broke: look, then subscribe again.
                    Ok(None) => break,
                }
            }
        }
    }
}
