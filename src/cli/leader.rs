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

/// The field manager of `identity`'s writes to the Lease: `yuxi-operator/<identity>`, at most 128 bytes.
///
/// It must differ between replicas: a replica takes a free Lease by a server-side apply of
/// `holderIdentity`, and only another manager's ownership of that field makes the API server refuse the
/// second of two replicas applying at once (409 Conflict). With one manager for all, both applies
/// succeed, the last writer holds the Lease, and both replicas lead until the next renewal (seen on a
/// real API server: two leaders for ten seconds).
pub fn lease_field_manager(identity: &str) -> String {
    let mut manager = format!("{FIELD_MANAGER}/{identity}");
    while manager.len() > 128 {
        manager.pop();
    }
    manager
}

/// Frees the Lease `namespace`/`name` when it has expired while still taken under the one field manager
/// that every replica of earlier versions shared (`yuxi-operator`): a replica of this version takes a
/// Lease by a server-side apply under its own manager, which that stale ownership of `holderIdentity`
/// would refuse for good if the last holder died without releasing it. A live or released Lease is left
/// alone. Errors: the API server's, when it cannot read or patch the Lease.
async fn free_an_expired_shared_lease(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    identity: &str,
) -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), namespace);
    let Some(lease) =
        leases.get_opt(name).await.map_err(|e| anyhow::anyhow!("cannot read the Lease {namespace}/{name}: {e}"))?
    else {
        return Ok(());
    };
    let shared = lease.metadata.managed_fields.iter().flatten().any(|entry| {
        entry.manager.as_deref() == Some(FIELD_MANAGER)
            && entry.operation.as_deref() == Some("Apply")
            && entry.fields_v1.as_ref().is_some_and(|f| f.0.to_string().contains("f:holderIdentity"))
    });
    let spec = lease.spec.unwrap_or_default();
    let renewed = spec.renew_time.as_ref().map(|t| t.0);
    let duration = jiff::SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
    let expired = renewed.is_none_or(|at| at + duration < jiff::Timestamp::now());
    if !(shared && expired && spec.holder_identity.is_some()) {
        return Ok(());
    }
    tracing::info!(lease = %name, holder = ?spec.holder_identity, "freeing an expired Lease taken by an earlier version");
    let release = serde_json::json!({"spec": {"holderIdentity": null, "acquireTime": null, "renewTime": null}});
    let params = kube::api::PatchParams { field_manager: Some(lease_field_manager(identity)), ..Default::default() };
    leases
        .patch(name, &params, &kube::api::Patch::Strategic(&release))
        .await
        .map_err(|e| anyhow::anyhow!("cannot free the expired Lease {namespace}/{name}: {e}"))?;
    Ok(())
}

/// This replica's place in the election: whether it leads, watched while the Lease is renewed in the
/// background.
pub struct Leadership {
    elected: watch::Receiver<bool>,
    lease_task: JoinHandle<kube_lease_manager::Result<LeaseManager>>,
}

impl Leadership {
    /// Joins the election for Lease `namespace`/`name` as `identity`; the Lease's writes carry this
    /// replica's own field manager ([`lease_field_manager`]). Errors: the Lease manager cannot be set up
    /// (the message names the Lease).
    pub async fn join(client: kube::Client, namespace: &str, name: &str, identity: &str) -> anyhow::Result<Self> {
        free_an_expired_shared_lease(&client, namespace, name, identity).await?;
        let lease = LeaseManagerBuilder::new(client, name)
            .with_namespace(namespace)
            .with_identity(identity)
            .with_duration(LEASE_DURATION_SECONDS)
            .with_grace(LEASE_GRACE_SECONDS)
            .with_field_manager(lease_field_manager(identity))
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

#[cfg(test)]
mod tests {
    #[test]
    fn each_replica_writes_the_lease_as_a_manager_of_its_own() {
        assert_eq!(super::lease_field_manager("controller-0"), "yuxi-operator/controller-0");
        assert_ne!(super::lease_field_manager("controller-0"), super::lease_field_manager("controller-1"));
        assert_eq!(super::lease_field_manager(&"x".repeat(200)).len(), 128);
    }
}
