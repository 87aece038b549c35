//! Leader election for the controller: replicas compete for one Kubernetes Lease, and only its holder
//! reconciles, so two replicas never act on the same object.
//!
//! The Lease lasts 15 s and is renewed 5 s before it runs out; a replica that stops releases it, so a
//! standby takes over at once rather than after the Lease expires.

use std::future::Future;

use kube_lease_manager::{LeaseManager, LeaseManagerBuilder};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use yuxi_operator::resources::names::FIELD_MANAGER;

/// How long a Lease holds without renewal, in seconds.
const LEASE_DURATION_SECONDS: u64 = 15;
/// How long before the end of the Lease its holder renews it, in seconds.
const LEASE_GRACE_SECONDS: u64 = 5;

/// This replica's identity in the Lease: `given` (the pod's name), or `yuxi-operator-<random>`.
pub fn identity(given: Option<String>) -> String {
    given.unwrap_or_else(|| format!("yuxi-operator-{}", uuid::Uuid::new_v4().simple()))
}

/// This replica's place in the election: whether it leads, watched while the Lease is renewed in the
/// background.
pub struct Leadership {
    elected: watch::Receiver<bool>,
    lease_task: JoinHandle<kube_lease_manager::Result<LeaseManager>>,
}

impl Leadership {
    /// Joins the election for Lease `namespace`/`name` as `identity`; the Lease's writes carry the
    /// controller's field manager. Errors: the Lease manager cannot be set up (the message names the Lease).
    pub async fn join(client: kube::Client, namespace: &str, name: &str, identity: &str) -> anyhow::Result<Self> {
        let lease = LeaseManagerBuilder::new(client, name)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(LEASE_DURATION_SECONDS)
            .with_grace(LEASE_GRACE_SECONDS)
            .with_field_manager(FIELD_MANAGER)
            .build()
            .await
            .map_err(|e| anyhow::anyhow!("cannot set up leader election on Lease {namespace}/{name}: {e}"))?;
        let (elected, lease_task) = lease.watch().await;
        Ok(Self { elected, lease_task })
    }

    /// Resolves when this replica leads. Errors: the election stopped before it did.
    pub async fn wait_to_lead(&mut self) -> anyhow::Result<()> {
        self.elected.wait_for(|leader| *leader).await.map_err(|_| anyhow::anyhow!("leader election stopped"))?;
        Ok(())
    }

    /// Resolves when this replica no longer leads (the Lease was lost, or the election stopped).
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut elected = self.elected.clone();
        async move {
            let _ = elected.wait_for(|leader| !*leader).await;
        }
    }

    /// Leaves the election and releases the Lease, so that a standby replica takes it now; when it cannot
    /// be released, logs a warning and the Lease expires on its own.
    pub async fn release(self) {
        let Self { elected, lease_task } = self;
        // With no receiver left, the manager stops renewing, releases the Lease and hands itself back.
        drop(elected);
        if let Ok(Ok(manager)) = lease_task.await
            && let Err(err) = manager.release().await
        {
            tracing::warn!(error = %err, "cannot release the leader Lease; another replica takes it when it expires");
        }
    }
}
