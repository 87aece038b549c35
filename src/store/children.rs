//! A run's children, for [`Store`]: the runs a run started, as their records name their parent (kept
//! by the run's creation, [`Store::create_run`]), and the cancel of those that have not ended.

use crate::store::Store;
use crate::store::types::StoreError;

/// Parents and credentials: what the facade keeps for the runs it starts.
impl Store {
    /// The runs `parent_run_id` started, in no particular order.
    pub async fn children(&self, parent_run_id: &str) -> Result<Vec<String>, StoreError> {
        match self {
            Store::Redis(redis) => redis.children(parent_run_id).await,
            Store::Memory(memory) => Ok(memory.children(parent_run_id)),
        }
    }

    /// Cancels every unfinished run `parent_run_id` started (see [`Store::cancel_run`]); returns how many
    /// were unfinished.
    pub async fn cancel_children(&self, parent_run_id: &str) -> Result<usize, StoreError> {
        let mut cancelled = 0;
        for child in self.children(parent_run_id).await? {
            if let Some(record) = self.run_record(&child).await?
                && !record.status.is_terminal()
            {
                self.cancel_run(&child).await?;
                cancelled += 1;
            }
        }
        Ok(cancelled)
    }
}
