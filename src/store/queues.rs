//! The threads' request queues of [`Store`] ([`crate::run::queue`]): each thread a list of request ids,
//! next first, and each request under its owner ([`keys::request`]); the set of threads with waiting
//! requests ([`keys::QUEUED_THREADS`]) lets any facade start what waits, after a restart too. Every step
//! that reads and changes a queue is one Redis script (or one hold of the in-process lock), so two
//! facades never start the same request.

pub use super::types::Enqueued;
use crate::run::queue::{QueuedRequest, REQUEST_TTL_SECONDS};
use crate::store::types::StoreError;
use crate::store::{Store, keys};

/// Queues: KEYS = queue, request, queued threads; ARGV = request JSON, most, TTL, front (0/1), thread.
const ENQUEUE: &str = r"
if redis.call('EXISTS', KEYS[2]) == 1 then return -2 end
if redis.call('LLEN', KEYS[1]) >= tonumber(ARGV[2]) then return -1 end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[3])
local at
if ARGV[4] == '1' then redis.call('LPUSH', KEYS[1], ARGV[5]); at = 1
else at = redis.call('RPUSH', KEYS[1], ARGV[5]) end
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[6])
return at
";

/// Moves an id to the front: KEYS = queue; ARGV = id. Returns whether it was queued.
const TO_FRONT: &str = r"
if redis.call('LREM', KEYS[1], 0, ARGV[1]) == 0 then return 0 end
redis.call('LPUSH', KEYS[1], ARGV[1])
return 1
";

/// Removes an id: KEYS = queue, queued threads; ARGV = id, thread. Returns whether it was queued.
const REMOVE: &str = r"
local removed = redis.call('LREM', KEYS[1], 0, ARGV[1])
if redis.call('LLEN', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], ARGV[2]) end
return removed
";

impl Store {
    /// Queues `request` in its thread, at the back (at the front when steered), at most `max` in the
    /// queue, and records it under its owner.
    pub async fn enqueue_request(&self, request: &QueuedRequest, max: usize) -> Result<Enqueued, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.lock_queues(|q| q.enqueue(request, max))),
            Store::Redis(redis) => {
                let thread = &request.record.thread_id;
                let json = serde_json::to_string(request).expect("a request serializes");
                let at: i64 = redis
                    .run_script(
                        ENQUEUE,
                        &[
                            &keys::thread_queue(thread),
                            &keys::request(&request.identity.uid, &request.request_id),
                            keys::QUEUED_THREADS,
                        ],
                        &[
                            &json,
                            &max.to_string(),
                            &REQUEST_TTL_SECONDS.to_string(),
                            if request.steer { "1" } else { "0" },
                            &request.request_id,
                            thread,
                        ],
                    )
                    .await?;
                Ok(match at {
                    -2 => Enqueued::Taken,
                    -1 => Enqueued::Full,
                    at => Enqueued::At(at.max(1) as usize),
                })
            }
        }
    }

    /// The user's request of this id, queued or not (for a day).
    pub async fn queued_request(&self, uid: &str, request_id: &str) -> Result<Option<QueuedRequest>, StoreError> {
        match self {
            Store::Memory(memory) => {
                Ok(memory.lock_queues(|q| q.requests.get(&(uid.into(), request_id.into())).cloned()))
            }
            Store::Redis(redis) => redis.get_json(keys::request(uid, request_id)).await,
        }
    }

    /// Records a change of `request` (its status, its run).
    pub async fn put_request(&self, request: &QueuedRequest) -> Result<(), StoreError> {
        match self {
            Store::Memory(memory) => {
                memory.lock_queues(|q| q.keep(request.clone()));
                Ok(())
            }
            Store::Redis(redis) => {
                let json = serde_json::to_string(request).expect("a request serializes");
                let mut pipe = redis::pipe();
                pipe.set_ex(
                    keys::request(&request.identity.uid, &request.request_id),
                    json,
                    REQUEST_TTL_SECONDS as u64,
                )
                .ignore();
                redis.write(&pipe).await
            }
        }
    }

    /// Records `request` unless its owner already has a request of its id (queued or not); returns
    /// whether it was recorded. A run started at once is recorded so, as a dispatched request.
    pub async fn put_new_request(&self, request: &QueuedRequest) -> Result<bool, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.lock_queues(|q| {
                let key = (request.identity.uid.clone(), request.request_id.clone());
                if q.requests.contains_key(&key) {
                    return false;
                }
                q.keep(request.clone());
                true
            })),
            Store::Redis(redis) => {
                let json = serde_json::to_string(request).expect("a request serializes");
                let mut connection = redis.connection();
                let set: Option<String> = redis::cmd("SET")
                    .arg(keys::request(&request.identity.uid, &request.request_id))
                    .arg(json)
                    .arg("NX")
                    .arg("EX")
                    .arg(REQUEST_TTL_SECONDS)
                    .query_async(&mut connection)
                    .await?;
                Ok(set.is_some())
            }
        }
    }

    /// The requests waiting in the thread of `uid`, next first.
    pub async fn thread_requests(&self, thread_id: &str, uid: &str) -> Result<Vec<QueuedRequest>, StoreError> {
        let ids: Vec<String> = match self {
            Store::Memory(memory) => {
                memory.lock_queues(|q| q.queues.get(thread_id).map(|q| q.iter().cloned().collect()).unwrap_or_default())
            }
            Store::Redis(redis) => {
                redis.read(redis::cmd("LRANGE").arg(keys::thread_queue(thread_id)).arg(0).arg(-1)).await?
            }
        };
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(request) = self.queued_request(uid, &id).await? {
                out.push(request);
            }
        }
        Ok(out)
    }

    /// The next request of the thread, left in the queue (a start removes it once its run is recorded).
    pub async fn queue_head(&self, thread_id: &str) -> Result<Option<String>, StoreError> {
        match self {
            Store::Memory(memory) => {
                Ok(memory.lock_queues(|q| q.queues.get(thread_id).and_then(|queue| queue.front().cloned())))
            }
            Store::Redis(redis) => redis.read(redis::cmd("LINDEX").arg(keys::thread_queue(thread_id)).arg(0)).await,
        }
    }

    /// Claims the user's request for starting it, for `ttl`: one claimer at a time, so two facades
    /// never start the same request. Returns whether the caller holds the claim now.
    pub async fn claim_request(
        &self,
        uid: &str,
        request_id: &str,
        ttl: std::time::Duration,
    ) -> Result<bool, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.lock_queues(|q| q.claims.insert((uid.into(), request_id.into())))),
            Store::Redis(redis) => {
                let mut connection = redis.connection();
                let claimed: Option<String> = redis::cmd("SET")
                    .arg(keys::request_claim(uid, request_id))
                    .arg("1")
                    .arg("NX")
                    .arg("PX")
                    .arg(ttl.as_millis() as u64)
                    .query_async(&mut connection)
                    .await?;
                Ok(claimed.is_some())
            }
        }
    }

    /// Gives a claim back ([`Store::claim_request`]).
    pub async fn release_request(&self, uid: &str, request_id: &str) -> Result<(), StoreError> {
        match self {
            Store::Memory(memory) => {
                memory.lock_queues(|q| q.claims.remove(&(uid.into(), request_id.into())));
                Ok(())
            }
            Store::Redis(redis) => {
                let mut pipe = redis::pipe();
                pipe.del(keys::request_claim(uid, request_id)).ignore();
                redis.write(&pipe).await
            }
        }
    }

    /// Moves a waiting request to the front of its thread's queue; whether it was waiting.
    pub async fn steer_request(&self, thread_id: &str, request_id: &str) -> Result<bool, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.lock_queues(|q| {
                let queue = q.queues.entry(thread_id.into()).or_default();
                let Some(at) = queue.iter().position(|id| id == request_id) else { return false };
                let id = queue.remove(at).expect("present");
                queue.push_front(id);
                true
            })),
            Store::Redis(redis) => {
                let moved: i64 = redis.run_script(TO_FRONT, &[&keys::thread_queue(thread_id)], &[request_id]).await?;
                Ok(moved == 1)
            }
        }
    }

    /// Takes a waiting request off its thread's queue; whether it was waiting.
    pub async fn remove_request(&self, thread_id: &str, request_id: &str) -> Result<bool, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory.lock_queues(|q| q.remove(thread_id, request_id))),
            Store::Redis(redis) => {
                let removed: i64 = redis
                    .run_script(
                        REMOVE,
                        &[&keys::thread_queue(thread_id), keys::QUEUED_THREADS],
                        &[request_id, thread_id],
                    )
                    .await?;
                Ok(removed > 0)
            }
        }
    }

    /// The threads whose queues have requests.
    pub async fn queued_threads(&self) -> Result<Vec<String>, StoreError> {
        match self {
            Store::Memory(memory) => Ok(memory
                .lock_queues(|q| q.queues.iter().filter(|(_, q)| !q.is_empty()).map(|(t, _)| t.clone()).collect())),
            Store::Redis(redis) => redis.read(redis::cmd("SMEMBERS").arg(keys::QUEUED_THREADS)).await,
        }
    }
}
