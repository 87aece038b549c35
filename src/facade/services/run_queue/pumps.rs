//! The threads whose queue this facade process pumps ([`QueuePumps`]), held in the facade's state: one
//! pump a thread per process.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// The threads this process runs a pump for.
#[derive(Clone, Default)]
pub struct QueuePumps(Arc<Mutex<HashSet<String>>>);

impl QueuePumps {
    pub(super) fn claim(&self, thread_id: &str) -> bool {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(thread_id.to_string())
    }

    pub(super) fn release(&self, thread_id: &str) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(thread_id);
    }
}
