//! The in-process request queues ([`Queues`]), kept under the memory store's lock
//! ([`MemoryStore::lock_queues`](super::MemoryStore::lock_queues)); the queue operations of the store,
//! for both backends, are in [`crate::store::queues`].

use std::collections::VecDeque;

use crate::run::queue::QueuedRequest;
use crate::store::types::Enqueued;

/// The in-process queues: each thread's ids, and the requests by owner and id (the most recent
/// [`Queues::KEPT`] that are no longer waiting are kept for their status).
#[derive(Default)]
pub(in crate::store) struct Queues {
    pub(in crate::store) queues: std::collections::HashMap<String, VecDeque<String>>,
    pub(in crate::store) requests: std::collections::HashMap<(String, String), QueuedRequest>,
    order: VecDeque<(String, String)>,
    pub(in crate::store) claims: std::collections::HashSet<(String, String)>,
}

impl Queues {
    /// How many requests are kept at most (waiting ones are never dropped).
    const KEPT: usize = 1000;

    pub(in crate::store) fn enqueue(&mut self, request: &QueuedRequest, max: usize) -> Enqueued {
        let key = (request.identity.uid.clone(), request.request_id.clone());
        if self.requests.contains_key(&key) {
            return Enqueued::Taken;
        }
        let queue = self.queues.entry(request.record.thread_id.clone()).or_default();
        if queue.len() >= max {
            return Enqueued::Full;
        }
        let at = if request.steer {
            queue.push_front(request.request_id.clone());
            1
        } else {
            queue.push_back(request.request_id.clone());
            queue.len()
        };
        self.keep(request.clone());
        Enqueued::At(at)
    }

    pub(in crate::store) fn keep(&mut self, request: QueuedRequest) {
        let key = (request.identity.uid.clone(), request.request_id.clone());
        if self.requests.insert(key.clone(), request).is_none() {
            self.order.push_back(key);
        }
        let mut spared = 0;
        while self.order.len() > Self::KEPT + spared {
            let Some(oldest) = self.order.pop_front() else { break };
            if self.requests.get(&oldest).is_some_and(|r| r.status == crate::run::queue::RequestStatus::Queued) {
                self.order.push_back(oldest);
                spared += 1;
                continue;
            }
            self.requests.remove(&oldest);
        }
    }

    pub(in crate::store) fn remove(&mut self, thread_id: &str, request_id: &str) -> bool {
        let Some(queue) = self.queues.get_mut(thread_id) else { return false };
        let before = queue.len();
        queue.retain(|id| id != request_id);
        let removed = queue.len() < before;
        if queue.is_empty() {
            self.queues.remove(thread_id);
        }
        removed
    }
}
