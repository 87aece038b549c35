//! Every agent's run totals, for the run metrics: how runs ended and how long they took
//! ([`crate::run::metrics::RunEnd`]), added by each runner at its run's end and read by `/metrics`.
//! With Redis the hash [`keys::RUN_TOTALS`]; in process the same counts in memory. Both keep at most
//! [`keys::MAX_RUN_TOTALS`] fields: past it new ones are not counted, so the memory stays bounded
//! however many agents there are.

use std::collections::HashMap;

use crate::run::metrics::RunEnd;
use crate::store::types::StoreError;
use crate::store::{Store, keys};

/// Run totals.
impl Store {
    /// Adds one run's end to the totals of its namespace and agent.
    pub async fn record_run_end(&self, end: &RunEnd) -> Result<(), StoreError> {
        let fields: Vec<(String, i64)> = end
            .kinds()
            .into_iter()
            .map(|(kind, amount)| (crate::store::usage::total_field(&end.namespace, &end.agent, &kind), amount))
            .collect();
        match self {
            Store::Memory(memory) => {
                memory.usage().add_run_totals(fields);
                Ok(())
            }
            Store::Redis(redis) => {
                let fields_now: i64 = redis.read(::redis::cmd("HLEN").arg(keys::RUN_TOTALS)).await?;
                if fields_now as usize >= keys::MAX_RUN_TOTALS {
                    return Ok(());
                }
                let mut pipe = ::redis::pipe();
                for (field, amount) in fields {
                    pipe.hincr(keys::RUN_TOTALS, field, amount).ignore();
                }
                let () = pipe.query_async(&mut redis.connection()).await?;
                Ok(())
            }
        }
    }

    /// Every agent's totals: `(namespace, agent, kind, amount)`, sorted.
    pub async fn run_totals(&self) -> Result<Vec<(String, String, String, i64)>, StoreError> {
        let fields: Vec<(String, i64)> = match self {
            Store::Memory(memory) => memory.usage().run_totals(),
            Store::Redis(redis) => {
                let map: HashMap<String, i64> = redis.read(::redis::cmd("HGETALL").arg(keys::RUN_TOTALS)).await?;
                map.into_iter().collect()
            }
        };
        Ok(crate::store::usage::split_totals(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::RunStatus;

    #[tokio::test]
    async fn run_ends_add_up_by_namespace_agent_and_kind() {
        let store = Store::Memory(Default::default());
        let end = |status, ms| RunEnd {
            namespace: "team-a".into(),
            agent: "writer".into(),
            status,
            duration_ms: ms,
            queue_ms: Some(5),
            first_event_ms: None,
        };
        store.record_run_end(&end(RunStatus::Completed, 300)).await.expect("counted");
        store.record_run_end(&end(RunStatus::Failed, 700)).await.expect("counted");
        let totals = store.run_totals().await.expect("read");
        let get = |kind: &str| totals.iter().find(|t| t.2 == kind).map(|t| t.3);
        assert_eq!(get("status:completed"), Some(1));
        assert_eq!(get("status:failed"), Some(1));
        assert_eq!(get("duration:count"), Some(2));
        assert_eq!(get("duration:sum_ms"), Some(1000));
        assert_eq!(get("queue:le:50"), Some(2));
        assert!(totals.iter().all(|t| t.0 == "team-a" && t.1 == "writer"));
    }
}
