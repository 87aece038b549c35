//! Who the facade's writes to the Kubernetes API are made as ([`Writers`]): its own service account
//! (the default), or, with `--impersonate`, each caller, through `Impersonate-User`, `Impersonate-Uid`
//! and `Impersonate-Group`. Impersonated, a team's RBAC decides who may create what in which
//! namespace, the audit log names the person, and the admission webhook sees the real user; the
//! facade's account needs only `impersonate` (docs/concepts/trust-model.md). Reads are the facade's.

use std::sync::Arc;
use std::time::Duration;

use crate::access::{Identity, Principal};

/// How many callers' clients are kept.
const CLIENTS: u64 = 1_000;
/// How long a caller's client is kept after its last use.
const IDLE: Duration = Duration::from_secs(600);

/// Why a write cannot be made for a caller.
#[derive(Debug, thiserror::Error)]
pub enum WriteRefused {
    /// The facade writes as its callers, and this one has no Kubernetes identity it may take.
    #[error("this facade writes to the cluster as its callers: {0}")]
    NoIdentity(String),
    /// A client for the caller cannot be made.
    #[error("a Kubernetes client for {username:?} cannot be made: {reason}")]
    Client {
        /// The caller's Kubernetes username.
        username: String,
        /// Why.
        reason: String,
    },
}

/// The clients writes are made with.
#[derive(Clone)]
pub struct Writers {
    own: kube::Client,
    impersonating: Option<Arc<Impersonating>>,
}

struct Impersonating {
    config: kube::Config,
    clients: moka::sync::Cache<Principal, kube::Client>,
}

impl Writers {
    /// Writes made with `client`, the facade's own account.
    pub fn own(client: kube::Client) -> Writers {
        Writers { own: client, impersonating: None }
    }

    /// Writes made as each caller, with the facade's account `config` impersonating them (`client` is
    /// that account's, for what is not a caller's write).
    pub fn impersonating(client: kube::Client, config: kube::Config) -> Writers {
        let clients = moka::sync::Cache::builder().max_capacity(CLIENTS).time_to_idle(IDLE).build();
        Writers { own: client, impersonating: Some(Arc::new(Impersonating { config, clients })) }
    }

    /// Whether writes are made as the callers.
    pub fn impersonates(&self) -> bool {
        self.impersonating.is_some()
    }

    /// The facade's own client.
    pub fn own_client(&self) -> &kube::Client {
        &self.own
    }

    /// The client a write for `who` is made with: the facade's own, or one impersonating `who`'s
    /// [`Principal`] (made once and kept while used). Errors: impersonating, a caller without a
    /// Kubernetes identity, or one of Kubernetes' own (`system:`), which is never taken
    /// ([`Principal::impersonable`]).
    pub fn for_caller(&self, who: Option<&Principal>) -> Result<kube::Client, WriteRefused> {
        let Some(impersonating) = &self.impersonating else { return Ok(self.own.clone()) };
        let principal = who
            .ok_or_else(|| {
                WriteRefused::NoIdentity("your credentials name no Kubernetes user (log in through the cluster's identity provider or with a Kubernetes token)".into())
            })?
            .impersonable()
            .map_err(WriteRefused::NoIdentity)?;
        if let Some(client) = impersonating.clients.get(&principal) {
            return Ok(client);
        }
        let mut config = impersonating.config.clone();
        config.auth_info.impersonate = Some(principal.username.clone());
        config.auth_info.impersonate_uid = principal.uid.clone();
        config.auth_info.impersonate_groups = Some(principal.groups.clone()).filter(|g| !g.is_empty());
        let client = kube::Client::try_from(config)
            .map_err(|e| WriteRefused::Client { username: principal.username.clone(), reason: e.to_string() })?;
        impersonating.clients.insert(principal, client.clone());
        Ok(client)
    }

    /// [`Writers::for_caller`] for `who`.
    pub fn for_identity(&self, who: &Identity) -> Result<kube::Client, WriteRefused> {
        self.for_caller(who.principal.as_ref())
    }
}
