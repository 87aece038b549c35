//! Where the facade's agents live. In a cluster they are the Agent resources of the facade's namespace,
//! read and written through the Kubernetes API (so the admission webhook and the CRD's rules judge every
//! write too); in the local mode they are the manifests folder, read-only through the API, plus the agents
//! created through the API, kept as manifests in the data folder so they survive a restart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use crate::resources::names::FIELD_MANAGER;
use crate::resources::{Agent, GENERAL_PURPOSE, builtin_general_purpose};

/// A catalog operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// An agent with this slug exists already (create).
    #[error("agent {0:?} exists already")]
    Exists(String),
    /// There is no agent with this slug (replace, delete).
    #[error("agent {0:?} does not exist")]
    Missing(String),
    /// The agent cannot be changed this way: defined by a manifest file in the local mode, or changed by
    /// somebody else since it was read (a stale `resourceVersion`) in a cluster.
    #[error("{0}")]
    Conflict(String),
    /// The Kubernetes API refused the object (the CRD's rules or the admission webhook); the API's message.
    #[error("{0}")]
    Rejected(String),
    /// The storage failed: the Kubernetes API could not be reached, or a file could not be written.
    #[error("{0}")]
    Unavailable(String),
}

/// The agents, by slug.
#[derive(Clone)]
pub enum AgentCatalog {
    /// The local mode's.
    Local(LocalCatalog),
    /// A cluster's.
    Cluster(Box<ClusterCatalog>),
}

impl AgentCatalog {
    /// An in-memory local catalog of `agents` (nothing is written anywhere), with the built-in
    /// `general-purpose` added when none of them is it. The agents are taken as API-created: they can be
    /// changed and deleted.
    pub fn new(agents: Vec<Agent>) -> Self {
        AgentCatalog::Local(LocalCatalog::new(Vec::new(), agents, None))
    }

    /// Every agent, sorted by slug.
    pub async fn all(&self) -> Result<Vec<Agent>, CatalogError> {
        match self {
            AgentCatalog::Local(local) => Ok(local.all()),
            AgentCatalog::Cluster(cluster) => cluster.all().await,
        }
    }

    /// The agent `slug`, or `None`.
    pub async fn get(&self, slug: &str) -> Result<Option<Agent>, CatalogError> {
        match self {
            AgentCatalog::Local(local) => Ok(local.get(slug)),
            AgentCatalog::Cluster(cluster) => cluster.get(slug).await,
        }
    }

    /// Adds `agent`, named by its `metadata.name`. Errors: [`CatalogError::Exists`] when the slug is taken.
    pub async fn create(&self, agent: Agent) -> Result<Agent, CatalogError> {
        match self {
            AgentCatalog::Local(local) => local.create(agent),
            AgentCatalog::Cluster(cluster) => cluster.create(agent).await,
        }
    }

    /// Replaces the agent of the same slug with `agent`, which must carry the `resourceVersion` it was
    /// read with in a cluster. Errors: [`CatalogError::Missing`], [`CatalogError::Conflict`].
    pub async fn replace(&self, agent: Agent) -> Result<Agent, CatalogError> {
        match self {
            AgentCatalog::Local(local) => local.replace(agent),
            AgentCatalog::Cluster(cluster) => cluster.replace(agent).await,
        }
    }

    /// Deletes the agent `slug`. Errors: [`CatalogError::Missing`], [`CatalogError::Conflict`].
    pub async fn delete(&self, slug: &str) -> Result<(), CatalogError> {
        match self {
            AgentCatalog::Local(local) => local.delete(slug),
            AgentCatalog::Cluster(cluster) => cluster.delete(slug).await,
        }
    }
}

/// Where a local agent came from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Origin {
    /// The built-in `general-purpose`.
    Builtin,
    /// A file of the manifests folder: read-only through the API.
    Manifest,
    /// The API (or a test).
    Api,
}

/// The local mode's agents: the manifests folder plus those created through the API, the latter kept as
/// `<slug>.yaml` manifests (the YAML `kubectl apply` takes) in a folder of the data folder.
#[derive(Clone)]
pub struct LocalCatalog {
    agents: Arc<RwLock<BTreeMap<String, (Agent, Origin)>>>,
    saved_in: Option<PathBuf>,
}

impl LocalCatalog {
    /// A catalog of the manifests folder's agents and of the agents saved earlier in `saved_in` (where
    /// the API's changes are written; `None` keeps them in memory). A saved agent with the slug of a
    /// manifest's is ignored: the manifests folder wins. The built-in `general-purpose` is added unless a
    /// manifest defines it.
    pub fn new(manifests: Vec<Agent>, saved: Vec<Agent>, saved_in: Option<PathBuf>) -> Self {
        let mut map = BTreeMap::new();
        for agent in saved {
            map.insert(agent.name_any(), (agent, Origin::Api));
        }
        for agent in manifests {
            if map.insert(agent.name_any(), (agent.clone(), Origin::Manifest)).is_some() {
                tracing::warn!(slug = %agent.name_any(), "a saved agent has the slug of a manifest's; the manifest's is used");
            }
        }
        map.entry(GENERAL_PURPOSE.to_string()).or_insert_with(|| (builtin_general_purpose(), Origin::Builtin));
        Self { agents: Arc::new(RwLock::new(map)), saved_in }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, (Agent, Origin)>> {
        self.agents.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, (Agent, Origin)>> {
        self.agents.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn all(&self) -> Vec<Agent> {
        self.read().values().map(|(agent, _)| agent.clone()).collect()
    }

    fn get(&self, slug: &str) -> Option<Agent> {
        self.read().get(slug).map(|(agent, _)| agent.clone())
    }

    fn create(&self, agent: Agent) -> Result<Agent, CatalogError> {
        let slug = agent.name_any();
        let mut agents = self.write();
        if agents.contains_key(&slug) {
            return Err(CatalogError::Exists(slug));
        }
        self.save(&slug, &agent)?;
        agents.insert(slug, (agent.clone(), Origin::Api));
        Ok(agent)
    }

    fn replace(&self, agent: Agent) -> Result<Agent, CatalogError> {
        let slug = agent.name_any();
        let mut agents = self.write();
        Self::changeable(agents.get(&slug).map(|(_, origin)| origin), &slug)?;
        self.save(&slug, &agent)?;
        agents.insert(slug, (agent.clone(), Origin::Api));
        Ok(agent)
    }

    fn delete(&self, slug: &str) -> Result<(), CatalogError> {
        let mut agents = self.write();
        Self::changeable(agents.get(slug).map(|(_, origin)| origin), slug)?;
        if let Some(dir) = &self.saved_in {
            let file = dir.join(format!("{slug}.yaml"));
            match std::fs::remove_file(&file) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => return Err(CatalogError::Unavailable(format!("cannot remove {}: {err}", file.display()))),
            }
        }
        agents.remove(slug);
        Ok(())
    }

    fn changeable(origin: Option<&Origin>, slug: &str) -> Result<(), CatalogError> {
        match origin {
            None => Err(CatalogError::Missing(slug.to_string())),
            Some(Origin::Api) => Ok(()),
            Some(Origin::Builtin) => {
                Err(CatalogError::Conflict(format!("the built-in {slug} subagent cannot be changed or deleted")))
            }
            Some(Origin::Manifest) => Err(CatalogError::Conflict(format!(
                "agent {slug:?} is defined in the manifests folder; change or remove it there"
            ))),
        }
    }

    /// Writes the agent's manifest, through a temporary file renamed into place so a crash leaves the old
    /// file or the new one, never half of one.
    fn save(&self, slug: &str, agent: &Agent) -> Result<(), CatalogError> {
        let Some(dir) = &self.saved_in else { return Ok(()) };
        let unavailable = |what: &Path, err: &dyn std::fmt::Display| {
            CatalogError::Unavailable(format!("cannot save agent {slug:?} in {}: {err}", what.display()))
        };
        std::fs::create_dir_all(dir).map_err(|e| unavailable(dir, &e))?;
        let text = serde_norway::to_string(agent).map_err(|e| unavailable(dir, &e))?;
        let file = dir.join(format!("{slug}.yaml"));
        let partial = dir.join(format!(".{slug}.yaml.partial"));
        std::fs::write(&partial, text).map_err(|e| unavailable(&partial, &e))?;
        std::fs::rename(&partial, &file).map_err(|e| unavailable(&file, &e))
    }
}

/// A cluster's agents: the Agent resources of one namespace, through the Kubernetes API. The built-in
/// `general-purpose` is served even before the controller has created its resource.
#[derive(Clone)]
pub struct ClusterCatalog {
    api: Api<Agent>,
}

impl ClusterCatalog {
    /// The Agents of `namespace`.
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        Self { api: Api::namespaced(client, namespace) }
    }

    async fn all(&self) -> Result<Vec<Agent>, CatalogError> {
        let mut agents: BTreeMap<String, Agent> = BTreeMap::new();
        let mut params = ListParams::default().limit(500);
        loop {
            let page = self.api.list(&params).await.map_err(kube_error)?;
            agents.extend(page.items.into_iter().map(|a| (a.name_any(), a)));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        agents.entry(GENERAL_PURPOSE.to_string()).or_insert_with(builtin_general_purpose);
        Ok(agents.into_values().collect())
    }

    async fn get(&self, slug: &str) -> Result<Option<Agent>, CatalogError> {
        match self.api.get_opt(slug).await.map_err(kube_error)? {
            None if slug == GENERAL_PURPOSE => Ok(Some(builtin_general_purpose())),
            found => Ok(found),
        }
    }

    fn params() -> PostParams {
        PostParams { dry_run: false, field_manager: Some(FIELD_MANAGER.to_string()) }
    }

    async fn create(&self, agent: Agent) -> Result<Agent, CatalogError> {
        let slug = agent.name_any();
        self.api.create(&Self::params(), &agent).await.map_err(|err| match err {
            kube::Error::Api(status) if status.code == 409 => CatalogError::Exists(slug),
            other => kube_error(other),
        })
    }

    async fn replace(&self, agent: Agent) -> Result<Agent, CatalogError> {
        let slug = agent.name_any();
        if agent.resource_version().is_none() {
            return Err(CatalogError::Conflict(format!("agent {slug:?} has no resource in the cluster to replace")));
        }
        self.api.replace(&slug, &Self::params(), &agent).await.map_err(|err| match err {
            kube::Error::Api(status) if status.code == 404 => CatalogError::Missing(slug.clone()),
            kube::Error::Api(status) if status.code == 409 => CatalogError::Conflict(format!(
                "agent {slug:?} was changed by somebody else since it was read; read it again and retry"
            )),
            other => kube_error(other),
        })
    }

    async fn delete(&self, slug: &str) -> Result<(), CatalogError> {
        self.api.delete(slug, &DeleteParams::default()).await.map(|_| ()).map_err(|err| match err {
            kube::Error::Api(status) if status.code == 404 => CatalogError::Missing(slug.to_string()),
            other => kube_error(other),
        })
    }
}

/// An API server's refusal (400, 422 from the schema or a CEL rule, a denial by an admission webhook) is
/// the client's fault and keeps the API's message; anything else, a 403 of RBAC included, means the API
/// is not available to the facade.
fn kube_error(err: kube::Error) -> CatalogError {
    match err {
        kube::Error::Api(status)
            if matches!(status.code, 400 | 422)
                || (status.code == 403 && status.message.contains("admission webhook")) =>
        {
            CatalogError::Rejected(status.message)
        }
        kube::Error::Api(status) => {
            CatalogError::Unavailable(format!("the Kubernetes API answered {}: {}", status.code, status.message))
        }
        other => CatalogError::Unavailable(format!("the Kubernetes API cannot be reached: {other}")),
    }
}
