//! Warm pods' claims ([`crate::run::claim`]): the controller offers a claimed pod its run, and that
//! pod's runner takes it, once.

use std::time::{Duration, Instant};

use super::keys::{CLAIM_TTL_SECONDS, pod_claim};
use super::{Store, StoreError};

/// How long one wait on the claim key lasts before it is asked again, in seconds (below the store's
/// response timeout).
const WAIT_SLICE_SECONDS: f64 = 1.0;
/// How often the in-process store is looked at while a claim is awaited.
const MEMORY_POLL: Duration = Duration::from_millis(50);

impl Store {
    /// Offers pod `pod_uid` its claim `claim` (the JSON of a [`crate::run::claim::Claim`]), in place of
    /// any earlier one; it lasts [`CLAIM_TTL_SECONDS`] unless taken.
    pub async fn offer_claim(&self, pod_uid: &str, claim: &str) -> Result<(), StoreError> {
        match self {
            Store::Redis(redis) => {
                let key = pod_claim(pod_uid);
                let mut pipe = ::redis::pipe();
                pipe.atomic().del(&key).ignore().rpush(&key, claim).ignore().expire(&key, CLAIM_TTL_SECONDS).ignore();
                redis.write(&pipe).await
            }
            Store::Memory(memory) => {
                memory.offer_claim(pod_uid, claim);
                Ok(())
            }
        }
    }

    /// Takes pod `pod_uid`'s claim, waiting for it at most `wait`: `None` when none came. A taken claim
    /// is gone: nobody takes it twice.
    pub async fn take_claim(&self, pod_uid: &str, wait: Duration) -> Result<Option<String>, StoreError> {
        let deadline = Instant::now() + wait;
        let key = pod_claim(pod_uid);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let taken = match self {
                Store::Redis(redis) => {
                    let slice = left.as_secs_f64().clamp(0.01, WAIT_SLICE_SECONDS);
                    let popped: Option<(String, String)> =
                        ::redis::cmd("BLPOP").arg(&key).arg(slice).query_async(&mut redis.connection()).await?;
                    popped.map(|(_, claim)| claim)
                }
                Store::Memory(memory) => match memory.take_claim(pod_uid) {
                    Some(claim) => Some(claim),
                    None => {
                        tokio::time::sleep(MEMORY_POLL.min(left)).await;
                        None
                    }
                },
            };
            if taken.is_some() || left.is_zero() {
                return Ok(taken);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_claim_is_taken_once_and_only_by_its_pod() {
        let store = Store::memory();
        store.offer_claim("pod-a", "{}").await.expect("offer");
        assert_eq!(store.take_claim("pod-b", Duration::from_millis(60)).await.expect("take"), None);
        assert_eq!(store.take_claim("pod-a", Duration::from_millis(60)).await.expect("take").as_deref(), Some("{}"));
        assert_eq!(store.take_claim("pod-a", Duration::from_millis(60)).await.expect("take"), None, "taken once");
    }
}
