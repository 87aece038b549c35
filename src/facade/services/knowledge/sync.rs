//! Keeping each knowledge base's index equal to its documents: re-indexing by content hash, uploads and
//! deletions that leave nothing half-indexed, and the status written back to the resource in a cluster.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde_json::json;

use super::{Base, IndexState, Knowledge, MAX_DOCUMENTS, SYNC_EVERY, generation, within};
use crate::knowledge::extract::{DocumentKind, MAX_DOCUMENT_BYTES};
use crate::knowledge::index::IndexedDocument;
use crate::knowledge::isolated::SOURCES_READER;
use crate::knowledge::{Prepared, content_hash, prepare};
use crate::resources::KnowledgeBase;
use crate::resources::names::FACADE_FIELD_MANAGER;

/// Why an upload or a deletion was refused.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// The knowledge base's documents come from a folder or a service, not from uploads.
    #[error("knowledge base {0:?} does not take uploads: its documents come from its source")]
    NotUploads(String),
    /// The document cannot be indexed (its kind, its size, its text); nothing was stored.
    #[error("file: {0}")]
    Unreadable(crate::knowledge::extract::ExtractError),
    /// The knowledge base holds [`MAX_DOCUMENTS`] documents already.
    #[error("knowledge base {0:?} holds {MAX_DOCUMENTS} documents, the most allowed; delete one first")]
    Full(String),
    /// No such document.
    #[error("knowledge base {slug:?} has no document {name:?}")]
    NoDocument {
        /// The knowledge base.
        slug: String,
        /// The document.
        name: String,
    },
    /// The files or the index could not be written; nothing changed.
    #[error("{0}")]
    Storage(String),
    /// The knowledge base was deleted (or replaced by another of its slug) while the change waited;
    /// nothing was stored.
    #[error("knowledge base {0:?} does not exist")]
    Gone(String),
    /// The embeddings endpoint failed; nothing was stored.
    #[error("{0}; nothing was stored")]
    Embeddings(crate::knowledge::embeddings::EmbeddingsError),
}

impl Knowledge {
    /// `kb`'s state, after indexing it first if it changed since it was last indexed (or never was).
    pub(super) async fn up_to_date(&self, kb: &KnowledgeBase, base: &Arc<Base>) -> IndexState {
        let state = base.state();
        if state.generation.as_deref() == Some(generation(kb).as_str()) {
            return state;
        }
        self.sync(kb, base).await
    }

    /// Brings `kb`'s index up to date with its documents: new and changed documents (by content hash)
    /// are indexed, gone ones removed. A document that cannot be read is left as it was indexed and
    /// named in the state's error; a source folder or ConfigMap that cannot be read makes it not ready.
    pub async fn sync(&self, kb: &KnowledgeBase, base: &Arc<Base>) -> IndexState {
        let _writer = base.writer.lock().await;
        let documents = self.source_documents(kb).await;
        let (base2, slug) = (base.clone(), kb.name_any());
        let embedder = self.embeddings.clone().map(|e| (e, tokio::runtime::Handle::current()));
        let outcome = tokio::task::spawn_blocking(move || reindex(&base2, documents, embedder.as_ref())).await;
        let mut state = match outcome {
            Ok(Ok((documents, chunks, problems))) => IndexState {
                ready: true,
                error: (!problems.is_empty()).then(|| problems.join("; ")),
                documents,
                chunks,
                ..IndexState::default()
            },
            // A failed write into a folder that was deleted says so, not what the index made of it (a
            // lock it could not take).
            Ok(Err(reason)) => IndexState {
                ready: false,
                error: Some(self.missing_index_folder().unwrap_or(reason)),
                ..IndexState::default()
            },
            Err(panicked) => IndexState { ready: false, error: Some(panicked.to_string()), ..IndexState::default() },
        };
        state.generation = Some(generation(kb));
        state.indexed_at = Some(jiff::Timestamp::now());
        if let Some(error) = &state.error {
            tracing::warn!(knowledge_base = %slug, error = %error, "indexing found problems");
        }
        // The resource's status is written when something changed, not on every pass of every replica.
        let unchanged = IndexState { indexed_at: None, ..base.state() }
            == IndexState { indexed_at: None, ..state.clone() }
            && kb.status.as_ref().and_then(|s| s.observed_generation) == kb.metadata.generation;
        base.set_state(state.clone());
        if !unchanged {
            self.write_status(kb, &state).await;
        }
        state
    }

    /// Where `kb`'s documents are: its uploads folder, its source folder under the sources root, or its
    /// ConfigMap's keys. Errors: a folder source without a sources root, or one that leaves it; a
    /// ConfigMap that is missing or that this facade may not read.
    async fn source_documents(&self, kb: &KnowledgeBase) -> Result<Documents, String> {
        let documents = kb.spec.source.documents.as_ref();
        if let Some(config_map) = documents.and_then(|d| d.config_map.as_ref()) {
            let found = self.objects.config_map(kb.namespace().as_deref(), &config_map.name).await?;
            return Ok(Documents::Given(config_map_documents(found)));
        }
        let Some(folder) = documents.and_then(|d| d.folder.as_deref()) else {
            return Ok(Documents::Folder(self.uploads_dir(&kb.name_any())));
        };
        let root =
            self.settings.sources_dir.as_ref().ok_or("this facade has no documents volume for folder sources")?;
        let path = root.join(folder);
        if !path.is_dir() {
            return Err(format!("its folder {folder:?} does not exist in the documents volume"));
        }
        if !within(&path, root) {
            return Err(format!("its folder {folder:?} leads out of the documents volume"));
        }
        Ok(Documents::Folder(path))
    }

    /// Indexes every knowledge base of the catalog, and forgets the indexes of those that are gone.
    pub async fn sync_all(&self) {
        let kbs = match self.catalog.all().await {
            Ok(kbs) => kbs,
            Err(err) => {
                tracing::warn!(error = %err, "cannot list the knowledge bases to index them");
                return;
            }
        };
        for kb in kbs.iter().filter(|kb| kb.spec.source.mcp.is_some()) {
            // Nothing to index: the status says it is served, once per generation.
            if kb.status.as_ref().and_then(|s| s.observed_generation) != kb.metadata.generation {
                self.write_status(kb, &self.state(kb)).await;
            }
        }
        for kb in kbs.iter().filter(|kb| kb.spec.source.documents.is_some()) {
            match self.base(&kb.name_any()) {
                Ok(base) => {
                    self.sync(kb, &base).await;
                }
                Err(reason) => tracing::warn!(knowledge_base = %kb.name_any(), error = %reason, "cannot open an index"),
            }
        }
        let known: Vec<String> =
            self.bases.lock().unwrap_or_else(std::sync::PoisonError::into_inner).keys().cloned().collect();
        for slug in known.iter().filter(|slug| !kbs.iter().any(|kb| kb.name_any() == **slug)) {
            self.forget(slug).await;
        }
    }

    /// Indexes every knowledge base now and every [`SYNC_EVERY`], until the task is dropped.
    pub fn spawn_syncer(self: Arc<Self>) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                self.sync_all().await;
                tokio::time::sleep(SYNC_EVERY).await;
            }
        })
    }

    /// Adds (or replaces) the document `name` of `kb` that `uid` uploads: it is read (at `uid`'s fair
    /// share of the reading places) and cut first, so a document that cannot be indexed is refused and
    /// nothing is stored; then stored and indexed, and if indexing fails the stored file goes again.
    ///
    /// Errors: [`ChangeError`].
    pub async fn upload(
        &self,
        kb: &KnowledgeBase,
        uid: &str,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<IndexedDocument, ChangeError> {
        let slug = kb.name_any();
        if !kb.spec.takes_uploads() {
            return Err(ChangeError::NotUploads(slug));
        }
        let (name2, uid) = (name.to_string(), uid.to_string());
        let prepared = tokio::task::spawn_blocking(move || prepare(&uid, &name2, &bytes).map(|p| (p, bytes)))
            .await
            .map_err(|e| ChangeError::Storage(e.to_string()))?
            .map_err(ChangeError::Unreadable)?;
        let (prepared, bytes): (Prepared, Vec<u8>) = prepared;
        let vectors = match &self.embeddings {
            Some(embeddings) => {
                let texts: Vec<String> = prepared.passages.iter().map(|p| p.text.clone()).collect();
                Some(embeddings.embed(&texts).await.map_err(ChangeError::Embeddings)?)
            }
            None => None,
        };
        let base = self.base(&slug).map_err(ChangeError::Storage)?;
        self.up_to_date(kb, &base).await;
        let _writer = base.writer.lock().await;
        self.still_current(kb, &base).await?;
        let dir = self.uploads_dir(&slug);
        let (base2, name2, hash) = (base.clone(), name.to_string(), prepared.content_hash.clone());
        let passages = prepared.passages.len();
        let documents_dir = self.settings.documents_dir.clone();
        let stored = tokio::task::spawn_blocking(move || {
            let indexed = base2.index.documents().map_err(|e| e.to_string())?;
            if indexed.len() >= MAX_DOCUMENTS && !indexed.iter().any(|d| d.name == name2) {
                return Ok(Err(()));
            }
            // The uploads' folder is made at start: only this knowledge base's folder is made here, so
            // a data folder deleted meanwhile is not begun again.
            if !documents_dir.is_dir() {
                return Err(format!("the documents' folder {} is gone", documents_dir.display()));
            }
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(err) => return Err(format!("cannot store the document: {err}")),
            }
            let partial = dir.join(format!(".{name2}.partial"));
            std::fs::write(&partial, &bytes).map_err(|e| format!("cannot store the document: {e}"))?;
            if let Err(err) =
                base2.index.put_document_with_vectors(&name2, &hash, &prepared.passages, vectors.as_deref())
            {
                let _ = std::fs::remove_file(&partial);
                return Err(err.to_string());
            }
            std::fs::rename(&partial, dir.join(&name2)).map_err(|e| format!("cannot store the document: {e}"))?;
            Ok(Ok(()))
        })
        .await
        .map_err(|e| ChangeError::Storage(e.to_string()))?;
        // A failed write into a folder that was deleted says so, not what the index made of it.
        stored
            .map_err(|reason| ChangeError::Storage(self.missing_index_folder().unwrap_or(reason)))?
            .map_err(|()| ChangeError::Full(slug.clone()))?;
        self.refresh_counts(kb, &base).await;
        Ok(IndexedDocument { name: name.to_string(), content_hash: prepared.content_hash, passages })
    }

    /// Removes the uploaded document `name` of `kb` from its index and its folder.
    ///
    /// Errors: [`ChangeError::NotUploads`], [`ChangeError::NoDocument`], [`ChangeError::Storage`].
    pub async fn delete_document(&self, kb: &KnowledgeBase, name: &str) -> Result<(), ChangeError> {
        let slug = kb.name_any();
        if !kb.spec.takes_uploads() {
            return Err(ChangeError::NotUploads(slug));
        }
        let base = self.base(&slug).map_err(ChangeError::Storage)?;
        self.up_to_date(kb, &base).await;
        let _writer = base.writer.lock().await;
        self.still_current(kb, &base).await?;
        let file = self.uploads_dir(&slug).join(name);
        let (base2, name2) = (base.clone(), name.to_string());
        let found = tokio::task::spawn_blocking(move || {
            let indexed = base2.index.documents().map_err(|e| e.to_string())?;
            if !indexed.iter().any(|d| d.name == name2) {
                return Ok(false);
            }
            base2.index.remove_document(&name2).map_err(|e| e.to_string())?;
            match std::fs::remove_file(&file) {
                Ok(()) => Ok(true),
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(true),
                Err(err) => Err(format!("cannot remove the document: {err}")),
            }
        })
        .await
        .map_err(|e| ChangeError::Storage(e.to_string()))?
        .map_err(ChangeError::Storage)?;
        if !found {
            return Err(ChangeError::NoDocument { slug, name: name.to_string() });
        }
        self.refresh_counts(kb, &base).await;
        Ok(())
    }

    /// Whether `kb`, read before a change waited for `base`'s writer, is still what its slug names:
    /// the catalog holds it (the same object: its uid and owner) and `base` is still its index. A
    /// knowledge base deleted meanwhile, or deleted and made again by someone else, is
    /// [`ChangeError::Gone`], and an index made for it while it was being deleted is dropped.
    async fn still_current(&self, kb: &KnowledgeBase, base: &Arc<Base>) -> Result<(), ChangeError> {
        let slug = kb.name_any();
        let gone = || ChangeError::Gone(slug.clone());
        let current = self.catalog.get(&slug).await.map_err(|e| ChangeError::Storage(e.to_string()))?;
        let same = current.is_some_and(|c| c.metadata.uid == kb.metadata.uid && c.spec.owner == kb.spec.owner);
        let registered = self
            .bases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&slug)
            .is_some_and(|b| Arc::ptr_eq(b, base));
        if same && registered {
            return Ok(());
        }
        if !same {
            let mut bases = self.bases.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if bases.get(&slug).is_some_and(|b| Arc::ptr_eq(b, base)) {
                bases.remove(&slug);
            }
        }
        Err(gone())
    }

    /// Updates the counts of `kb`'s state after a change through this replica.
    async fn refresh_counts(&self, kb: &KnowledgeBase, base: &Arc<Base>) {
        let mut state = base.state();
        state.documents = base.index.documents().map(|d| d.len()).unwrap_or(state.documents);
        state.chunks = base.index.passage_count();
        state.indexed_at = Some(jiff::Timestamp::now());
        base.set_state(state.clone());
        self.write_status(kb, &state).await;
    }

    /// Writes `state` as `kb`'s status in a cluster (a merge patch of the status subresource); a
    /// failure is logged, and the next indexing writes it again.
    async fn write_status(&self, kb: &KnowledgeBase, state: &IndexState) {
        let Some(api) = &self.status_api else { return };
        let status = status_of(kb, state);
        let patch = Patch::Merge(json!({ "status": status }));
        let params = PatchParams { field_manager: Some(FACADE_FIELD_MANAGER.to_string()), ..PatchParams::default() };
        if let Err(err) = api.patch_status(&kb.name_any(), &params, &patch).await {
            tracing::warn!(knowledge_base = %kb.name_any(), error = %err, "cannot write the knowledge base's status");
        }
    }
}

/// The resource status for `state`: `Accepted` true (the webhook and CEL admitted the spec), `Ready`
/// as the state says, the counts, the time and the error.
pub fn status_of(kb: &KnowledgeBase, state: &IndexState) -> crate::resources::KnowledgeBaseStatus {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    let now = Time(jiff::Timestamp::now());
    let condition = |type_: &str, ok: bool, reason: &str, message: String| Condition {
        type_: type_.into(),
        status: if ok { "True" } else { "False" }.into(),
        reason: reason.into(),
        message,
        last_transition_time: now.clone(),
        observed_generation: kb.metadata.generation,
    };
    let ready_reason = if state.ready { "Indexed" } else { "NotIndexed" };
    crate::resources::KnowledgeBaseStatus {
        observed_generation: kb.metadata.generation,
        source: Some(kb.spec.source_kind().into()),
        documents: Some(state.documents as i64),
        chunks: Some(state.chunks as i64),
        last_indexed_time: state.indexed_at.map(Time),
        last_index_error: state.error.clone(),
        conditions: vec![
            condition("Accepted", true, "Valid", "the spec is valid".into()),
            condition("Ready", state.ready, ready_reason, state.error.clone().unwrap_or_default()),
        ],
    }
}

/// Where the documents of a knowledge base are, as [`reindex`] reads them.
pub(super) enum Documents {
    /// The files of a folder (uploads, or a folder source), read one at a time.
    Folder(PathBuf),
    /// Documents already at hand (a ConfigMap's keys), by name.
    Given(Vec<(String, Vec<u8>)>),
}

/// The documents of a ConfigMap: each key of `data` (as UTF-8) and of `binaryData`, by key.
fn config_map_documents(config_map: k8s_openapi::api::core::v1::ConfigMap) -> Vec<(String, Vec<u8>)> {
    let text = config_map.data.into_iter().flatten().map(|(key, value)| (key, value.into_bytes()));
    let binary = config_map.binary_data.into_iter().flatten().map(|(key, value)| (key, value.0));
    text.chain(binary).collect()
}

/// One document to read: a file, or bytes at hand.
enum Entry {
    File(PathBuf),
    Bytes(Vec<u8>),
}

impl Entry {
    /// Its bytes. Errors: more than [`MAX_DOCUMENT_BYTES`], or the file cannot be read.
    fn read(self) -> Result<Vec<u8>, String> {
        let too_big = |len: u64| format!("{len} bytes; at most {MAX_DOCUMENT_BYTES} (max_document_bytes)");
        match self {
            Entry::Bytes(bytes) if bytes.len() > MAX_DOCUMENT_BYTES => Err(too_big(bytes.len() as u64)),
            Entry::Bytes(bytes) => Ok(bytes),
            Entry::File(path) => match std::fs::metadata(&path) {
                Ok(meta) if meta.len() > MAX_DOCUMENT_BYTES as u64 => Err(too_big(meta.len())),
                _ => std::fs::read(&path).map_err(|err| format!("cannot be read: {err}")),
            },
        }
    }
}

/// The documents of `documents` by name, sorted: a folder's regular files whose names do not start
/// with `.` (no sub-folders, no symbolic links), or the documents given. Errors: the folder cannot be
/// listed (one that does not exist has no documents: an uploads folder appears with the first upload).
fn entries(documents: Documents) -> Result<Vec<(String, Entry)>, String> {
    let mut found: Vec<(String, Entry)> = match documents {
        Documents::Given(given) => given.into_iter().map(|(name, bytes)| (name, Entry::Bytes(bytes))).collect(),
        Documents::Folder(folder) => match std::fs::read_dir(&folder) {
            Ok(listing) => listing
                .filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter_map(|e| e.file_name().to_str().map(|n| (n.to_string(), Entry::File(e.path()))))
                .collect(),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(err) => return Err(format!("its documents cannot be read: {err}")),
        },
    };
    found.retain(|(name, _)| !name.starts_with('.'));
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(found)
}

/// Re-indexes `base` from `documents`: the new and changed ones (by content hash) put, with their
/// passages' vectors when `embedder` is given (an endpoint that fails leaves the document indexed by
/// its words, and is named), the gone ones removed. Answers the documents and passages indexed and the
/// problems met (one per document that could not be read, or left out). Errors: the documents or the
/// index cannot be read.
fn reindex(
    base: &Base,
    documents: Result<Documents, String>,
    embedder: Option<&(crate::knowledge::embeddings::Embeddings, tokio::runtime::Handle)>,
) -> Result<(usize, u64, Vec<String>), String> {
    let indexed: BTreeMap<String, String> =
        base.index.documents().map_err(|e| e.to_string())?.into_iter().map(|d| (d.name, d.content_hash)).collect();
    let mut problems = Vec::new();
    let mut present = Vec::new();
    for (name, entry) in entries(documents?)? {
        if DocumentKind::of(&name).is_none() {
            continue;
        }
        if present.len() >= MAX_DOCUMENTS {
            problems.push(format!("{name}: left out, the knowledge base holds {MAX_DOCUMENTS} documents already"));
            continue;
        }
        present.push(name.clone());
        let bytes = match entry.read() {
            Ok(bytes) => bytes,
            Err(problem) => {
                problems.push(format!("{name}: {problem}"));
                continue;
            }
        };
        if indexed.get(&name).is_some_and(|hash| *hash == content_hash(&bytes)) {
            continue;
        }
        match prepare(SOURCES_READER, &name, &bytes) {
            Ok(prepared) => {
                let vectors = embedder.and_then(|(embeddings, runtime)| {
                    let texts: Vec<String> = prepared.passages.iter().map(|p| p.text.clone()).collect();
                    runtime
                        .block_on(embeddings.embed(&texts))
                        .map_err(|err| problems.push(format!("{name}: {err}")))
                        .ok()
                });
                base.index
                    .put_document_with_vectors(&name, &prepared.content_hash, &prepared.passages, vectors.as_deref())
                    .map_err(|e| e.to_string())?
            }
            Err(err) => problems.push(format!("{name}: {err}")),
        }
    }
    for gone in indexed.keys().filter(|name| !present.contains(name)) {
        base.index.remove_document(gone).map_err(|e| e.to_string())?;
    }
    let documents = base.index.documents().map_err(|e| e.to_string())?.len();
    Ok((documents, base.index.passage_count(), problems))
}
