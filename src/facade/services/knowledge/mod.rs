//! The knowledge bases the facade serves: their catalog, their documents, their indexes and their
//! searches (docs/concepts/knowledge.md).
//!
//! The facade owns the indexing. A `documents` knowledge base is indexed from its uploads (kept under
//! the documents folder, `<documents>/<slug>/`) or from a folder of the sources root; each facade
//! replica keeps its own index (`<index>/<slug>/`), brought up to date with the documents by content
//! hash: at start, after every change made through this replica, on a search that finds the knowledge
//! base changed (a new `metadata.generation`), and every [`SYNC_EVERY`]. An `mcp` knowledge base is
//! searched by calling its tool; nothing is indexed for it.
//!
//! The checks and passages of a search are in [`search`]; the HTTP routes are the knowledge feature's
//! (`/api/knowledge`) and the tools feature's (the runs' `knowledge_search`, over
//! [`crate::facade::services::run_knowledge`]).

pub mod search;
pub mod sync;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use super::catalog::KnowledgeCatalog;
use crate::knowledge::index::{Hit, IndexedDocument, KnowledgeIndex};
use crate::resources::KnowledgeBase;

/// How often every knowledge base is brought up to date with its documents.
pub const SYNC_EVERY: Duration = Duration::from_secs(30);

/// The most documents one knowledge base holds (`max_documents_per_knowledge_base`).
pub const MAX_DOCUMENTS: usize = 1000;

/// The most passages a search answers (`top_k` is 1 to this).
pub const MAX_TOP_K: usize = 20;

/// How deep each ranking is read before hybrid search fuses them.
const FUSED_DEPTH: usize = 50;

/// The longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 2000;

/// Where the facade's knowledge bases are kept and how their secrets are read.
#[derive(Clone, Debug)]
pub struct KnowledgeSettings {
    /// Uploaded documents, one folder per knowledge base. Shared by the replicas in a cluster.
    pub documents_dir: PathBuf,
    /// This replica's indexes, one folder per knowledge base; `None` keeps them in memory.
    pub index_dir: Option<PathBuf>,
    /// The root `documents.folder` is relative to (the manifests folder locally, the chart's sources
    /// volume in a cluster); `None` refuses folder sources.
    pub sources_dir: Option<PathBuf>,
}

/// Where the objects of the platform that knowledge bases name come from: the Secrets holding the
/// bearer tokens of MCP-backed ones and the ConfigMaps holding documents.
#[derive(Clone)]
pub enum PlatformObjects {
    /// The local mode.
    Local {
        /// Secrets as files, `<folder>/<secret>/<key>`, as a Secret mounted as a volume is laid out.
        secrets: PathBuf,
        /// The ConfigMaps of the manifests folder, replaced as it changes ([`Knowledge::set_config_maps`]).
        config_maps: Arc<std::sync::RwLock<Vec<ConfigMap>>>,
    },
    /// A cluster: the facade's namespace, as far as its Role lets it read (the chart's
    /// `knowledge.secretNames` and `knowledge.configMapNames`, by name).
    Cluster {
        /// Its Secrets.
        secrets: Box<kube::Api<k8s_openapi::api::core::v1::Secret>>,
        /// Its ConfigMaps.
        config_maps: Box<kube::Api<ConfigMap>>,
    },
}

impl PlatformObjects {
    /// The local mode's: Secrets as files under `secrets`, the manifests folder's `config_maps`.
    pub fn local(secrets: PathBuf, config_maps: Vec<ConfigMap>) -> Self {
        PlatformObjects::Local { secrets, config_maps: Arc::new(std::sync::RwLock::new(config_maps)) }
    }

    /// The objects of the facade's namespace reached through `client`.
    pub fn cluster(client: kube::Client, namespace: &str) -> Self {
        PlatformObjects::Cluster {
            secrets: Box::new(kube::Api::namespaced(client.clone(), namespace)),
            config_maps: Box::new(kube::Api::namespaced(client, namespace)),
        }
    }

    /// The ConfigMap `name` (of `namespace`, locally; the facade's own in a cluster). Errors, as the
    /// knowledge base's status says them: it does not exist, or the facade may not read it.
    pub async fn config_map(&self, namespace: Option<&str>, name: &str) -> Result<ConfigMap, String> {
        let missing = || format!("its ConfigMap {name:?} does not exist");
        match self {
            PlatformObjects::Local { config_maps, .. } => {
                let namespace = namespace.unwrap_or(crate::resources::manifest_set::DEFAULT_NAMESPACE);
                let of_namespace = |c: &&ConfigMap| {
                    c.namespace().as_deref().unwrap_or(crate::resources::manifest_set::DEFAULT_NAMESPACE) == namespace
                };
                let config_maps = config_maps.read().unwrap_or_else(std::sync::PoisonError::into_inner);
                config_maps.iter().filter(of_namespace).find(|c| c.name_any() == name).cloned().ok_or_else(missing)
            }
            PlatformObjects::Cluster { config_maps, .. } => match config_maps.get_opt(name).await {
                Ok(Some(found)) => Ok(found),
                Ok(None) => Err(missing()),
                Err(kube::Error::Api(status)) if status.code == 403 => Err(format!(
                    "the facade may not read its ConfigMap {name:?}: list it in the chart's knowledge.configMapNames"
                )),
                Err(err) => Err(format!("cannot read its ConfigMap {name:?}: {err}")),
            },
        }
    }
}

/// The facade's knowledge bases.
pub struct Knowledge {
    /// The KnowledgeBase objects.
    pub catalog: KnowledgeCatalog,
    settings: KnowledgeSettings,
    objects: PlatformObjects,
    /// Writes each knowledge base's status in a cluster.
    status_api: Option<kube::Api<KnowledgeBase>>,
    bases: Mutex<HashMap<String, Arc<Base>>>,
    /// Where passages' and queries' embedding vectors come from, for hybrid search; `None`: BM25 alone.
    embeddings: Option<crate::knowledge::embeddings::Embeddings>,
}

/// One knowledge base's index and what is known of it.
pub struct Base {
    index: KnowledgeIndex,
    /// Changes of the index, one at a time (a sync, an upload, a delete).
    writer: tokio::sync::Mutex<()>,
    state: Mutex<IndexState>,
}

/// What the last indexing of a knowledge base found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct IndexState {
    /// The `metadata.generation` (or, without one, the spec's hash) it was indexed for.
    pub generation: Option<String>,
    /// Whether searches are answered.
    pub ready: bool,
    /// Why not, or what went wrong with some documents.
    pub error: Option<String>,
    /// When indexing last finished.
    pub indexed_at: Option<jiff::Timestamp>,
    /// Documents indexed.
    pub documents: usize,
    /// Passages indexed.
    pub chunks: u64,
}

/// Why a knowledge base cannot be searched; the model reads the message.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// It is not ready (its folder cannot be read, its index cannot be opened).
    #[error("knowledge base {slug:?} is not ready: {reason}")]
    NotReady {
        /// The knowledge base.
        slug: String,
        /// Why.
        reason: String,
    },
    /// Its retrieval service failed.
    #[error("knowledge base {slug:?}: {source}")]
    Service {
        /// The knowledge base.
        slug: String,
        /// What the service did.
        source: crate::knowledge::mcp::McpSearchError,
    },
}

impl Knowledge {
    /// The knowledge bases of `catalog`, kept as `settings` says, MCP tokens and ConfigMap documents
    /// read from `objects`; `status_api` writes their status in a cluster.
    pub fn new(
        catalog: KnowledgeCatalog,
        settings: KnowledgeSettings,
        objects: PlatformObjects,
        status_api: Option<kube::Api<KnowledgeBase>>,
    ) -> Self {
        // The indexes' folder is made here, once: later each index makes only its own folder in it, so
        // a data folder deleted under the facade is said to be gone, never silently begun again.
        for dir in settings.index_dir.iter().chain([&settings.documents_dir]) {
            if let Err(err) = std::fs::create_dir_all(dir) {
                tracing::warn!(folder = %dir.display(), error = %err, "cannot make a knowledge folder");
            }
        }
        Self { catalog, settings, objects, status_api, bases: Mutex::new(HashMap::new()), embeddings: None }
    }

    /// Why the indexes' folder cannot hold an index, naming it: it is gone (the data folder was deleted
    /// under the facade). `None` for indexes in memory or a folder that is there.
    pub fn missing_index_folder(&self) -> Option<String> {
        let dir = self.settings.index_dir.as_ref()?;
        (!dir.is_dir()).then(|| {
            format!(
                "the indexes' folder {} is gone (was the data folder deleted?); restart to index again",
                dir.display()
            )
        })
    }

    /// The same, searching by words and by meaning: passages and queries get vectors from `embeddings`,
    /// and the two rankings are fused ([`crate::knowledge::hybrid`]).
    pub fn with_embeddings(mut self, embeddings: crate::knowledge::embeddings::Embeddings) -> Self {
        self.embeddings = Some(embeddings);
        self
    }

    /// Where an upload's bytes wait while they arrive: this replica's index folder (the documents'
    /// folder when indexes are kept in memory), made when missing. Errors: the folder cannot be made.
    pub fn spool_dir(&self) -> std::io::Result<PathBuf> {
        let dir = self.settings.index_dir.clone().unwrap_or_else(|| self.settings.documents_dir.clone());
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Puts `config_maps` in place of the local mode's ConfigMaps (a cluster's are read from the API and
    /// not changed here); the knowledge bases that name them are indexed again at their next sync.
    pub fn set_config_maps(&self, config_maps: Vec<ConfigMap>) {
        if let PlatformObjects::Local { config_maps: held, .. } = &self.objects {
            *held.write().unwrap_or_else(std::sync::PoisonError::into_inner) = config_maps;
        }
    }

    /// The uploads folder of `slug`.
    fn uploads_dir(&self, slug: &str) -> PathBuf {
        self.settings.documents_dir.join(slug)
    }

    /// The index of `slug`, opened (or created) on first use.
    pub fn base(&self, slug: &str) -> Result<Arc<Base>, String> {
        let mut bases = self.bases.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(base) = bases.get(slug) {
            return Ok(base.clone());
        }
        let index = match &self.settings.index_dir {
            Some(dir) => {
                if let Some(missing) = self.missing_index_folder() {
                    return Err(missing);
                }
                let dir = dir.join(slug);
                match std::fs::create_dir(&dir) {
                    Ok(()) => {}
                    Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(err) => return Err(format!("cannot create its index folder {}: {err}", dir.display())),
                }
                KnowledgeIndex::open(&dir)
            }
            None => KnowledgeIndex::in_memory(),
        }
        .map_err(|e| e.to_string())?;
        let base =
            Arc::new(Base { index, writer: tokio::sync::Mutex::new(()), state: Mutex::new(IndexState::default()) });
        bases.insert(slug.to_string(), base.clone());
        Ok(base)
    }

    /// What the last indexing of `kb` found (an MCP-backed one is always ready).
    pub fn state(&self, kb: &KnowledgeBase) -> IndexState {
        if kb.spec.source.mcp.is_some() {
            return IndexState { generation: Some(generation(kb)), ready: true, ..IndexState::default() };
        }
        let bases = self.bases.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        bases.get(&kb.name_any()).map(|b| b.state()).unwrap_or_default()
    }

    /// The documents of `kb`'s index. Errors: its index cannot be opened or read.
    pub async fn documents(&self, kb: &KnowledgeBase) -> Result<Vec<IndexedDocument>, String> {
        let base = self.base(&kb.name_any())?;
        let _ = self.up_to_date(kb, &base).await;
        tokio::task::spawn_blocking(move || base.index.documents().map_err(|e| e.to_string()))
            .await
            .map_err(|e| e.to_string())?
    }

    /// The `top_k` best passages of `kb` for `query`.
    ///
    /// Errors: [`SearchError::NotReady`] for a documents knowledge base whose documents cannot be read;
    /// [`SearchError::Service`] when an MCP-backed one's service fails.
    pub async fn search(&self, kb: &KnowledgeBase, query: &str, top_k: usize) -> Result<Vec<Hit>, SearchError> {
        let span = tracing::trace_span!(
            target: crate::telemetry::TARGET,
            "knowledge_search",
            otel.name = %format!("knowledge_search {}", kb.name_any()),
            otel.status_code = tracing::field::Empty,
            yuxi.knowledge_base = %kb.name_any(),
            yuxi.knowledge.source = if kb.spec.source.mcp.is_some() { "mcp" } else { "documents" },
            yuxi.knowledge.top_k = top_k as i64,
            yuxi.knowledge.hits = tracing::field::Empty,
        );
        let found = tracing::Instrument::instrument(self.search_in(kb, query, top_k), span.clone()).await;
        match &found {
            Ok(hits) => span.record("yuxi.knowledge.hits", hits.len() as i64),
            Err(_) => span.record("otel.status_code", "ERROR"),
        };
        found
    }

    async fn search_in(&self, kb: &KnowledgeBase, query: &str, top_k: usize) -> Result<Vec<Hit>, SearchError> {
        let slug = kb.name_any();
        if let Some(source) = &kb.spec.source.mcp {
            let token = self.token(kb).await.map_err(|reason| SearchError::NotReady { slug: slug.clone(), reason })?;
            let traceparent = crate::telemetry::current_traceparent();
            return crate::knowledge::mcp::search(source, token.as_deref(), query, top_k, traceparent)
                .await
                .map_err(|source| SearchError::Service { slug, source });
        }
        let not_ready = |reason: String| SearchError::NotReady { slug: slug.clone(), reason };
        let base = self.base(&slug).map_err(not_ready)?;
        let state = self.up_to_date(kb, &base).await;
        if !state.ready {
            return Err(not_ready(state.error.unwrap_or_else(|| "it has not been indexed yet".into())));
        }
        // With embeddings, the query's vector too; a failing endpoint leaves the words alone.
        let vector = match &self.embeddings {
            Some(embeddings) => match embeddings.embed(&[query.to_string()]).await {
                Ok(mut vectors) => vectors.pop(),
                Err(err) => {
                    tracing::warn!(knowledge_base = %slug, error = %err, "searching by words alone");
                    None
                }
            },
            None => None,
        };
        let query = query.to_string();
        tokio::task::spawn_blocking(move || {
            let Some(vector) = vector else { return base.index.search(&query, top_k) };
            let dense = base.index.nearest(&vector, FUSED_DEPTH)?;
            if dense.is_empty() {
                return base.index.search(&query, top_k);
            }
            let words = base.index.search(&query, FUSED_DEPTH)?;
            Ok(crate::knowledge::hybrid::fuse(&[words, dense], top_k))
        })
        .await
        .map_err(|e| not_ready(e.to_string()))?
        .map_err(|e| not_ready(e.to_string()))
    }

    /// The bearer token of an MCP-backed knowledge base, or `None` when it names no Secret.
    async fn token(&self, kb: &KnowledgeBase) -> Result<Option<String>, String> {
        let Some(secret) = kb.spec.source.mcp.as_ref().and_then(|m| m.auth_secret_ref.as_ref()) else {
            return Ok(None);
        };
        match &self.objects {
            PlatformObjects::Local { secrets: folder, .. } => {
                let segment = |s: &str| !s.is_empty() && !s.starts_with('.') && !s.contains('/');
                if !segment(&secret.name) || !segment(&secret.key) {
                    return Err(format!("Secret {:?} key {:?} cannot be a file name", secret.name, secret.key));
                }
                let file = folder.join(&secret.name).join(&secret.key);
                std::fs::read_to_string(&file)
                    .map(|t| Some(t.trim().to_string()))
                    .map_err(|e| format!("its token is read from {}, which cannot be read: {e}", file.display()))
            }
            PlatformObjects::Cluster { secrets: api, .. } => {
                let found = api.get_opt(&secret.name).await.map_err(|e| format!("cannot read its Secret: {e}"))?;
                let value = found
                    .and_then(|s| s.data)
                    .and_then(|mut data| data.remove(&secret.key))
                    .ok_or_else(|| format!("Secret {:?} has no key {:?}", secret.name, secret.key))?;
                String::from_utf8(value.0)
                    .map(|t| Some(t.trim().to_string()))
                    .map_err(|_| format!("the key {:?} of Secret {:?} is not text", secret.key, secret.name))
            }
        }
    }

    /// Forgets `slug`: its index and its uploads (a deleted knowledge base).
    pub async fn forget(&self, slug: &str) {
        let removed = self.bases.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(slug);
        if let Some(base) = removed {
            // Wait out a change under way.
            let _writer = base.writer.lock().await;
        }
        for dir in
            [Some(self.uploads_dir(slug)), self.settings.index_dir.as_ref().map(|d| d.join(slug))].into_iter().flatten()
        {
            if let Err(err) = tokio::fs::remove_dir_all(&dir).await
                && err.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(dir = %dir.display(), error = %err, "cannot remove a deleted knowledge base's files");
            }
        }
    }
}

impl Base {
    fn state(&self) -> IndexState {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn set_state(&self, state: IndexState) {
        *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = state;
    }
}

/// What a knowledge base's indexing is keyed by: its `metadata.generation` in a cluster, else a hash of
/// its spec (the local mode's objects have no generation).
pub fn generation(kb: &KnowledgeBase) -> String {
    match kb.metadata.generation {
        Some(generation) => generation.to_string(),
        None => crate::knowledge::content_hash(serde_json::to_string(&kb.spec).unwrap_or_default().as_bytes()),
    }
}

/// Whether `path` lies within `root`, both resolved (symbolic links followed).
fn within(path: &Path, root: &Path) -> bool {
    match (std::fs::canonicalize(path), std::fs::canonicalize(root)) {
        (Ok(path), Ok(root)) => path.starts_with(root),
        _ => false,
    }
}
