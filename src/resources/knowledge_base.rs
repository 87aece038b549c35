//! The `KnowledgeBase` custom resource (`knowledgebases.yuxi.dev/v1alpha1`).
//!
//! A KnowledgeBase is a body of documents agents search with the `knowledge_search` tool
//! (`spec.context.knowledges` of an Agent names them; absent = every knowledge base the user may read).
//! Its source is either documents the system indexes itself (uploaded through the facade, or the files
//! of a folder of the documents volume) or an external retrieval service reached as an MCP tool.
//! `metadata.name` is its slug. Sharing follows the Agents' rules ([`crate::access`]).
//!
//! As for Agents, the single-object rules are carried twice: CEL rules in the CRD and
//! [`crate::resources::validation::validate_knowledge_base`], kept in agreement by a test.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::AgentShare;

/// The desired state of a KnowledgeBase.
// Each `printcolumn(...)` repeats the same keys, which clippy takes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "yuxi.dev",
    version = "v1alpha1",
    kind = "KnowledgeBase",
    plural = "knowledgebases",
    singular = "knowledgebase",
    shortname = "kb",
    category = "yuxi",
    namespaced,
    status = "KnowledgeBaseStatus",
    doc = "A knowledge base agents search with `knowledge_search`: documents the system indexes (uploaded, or a folder of the documents volume) or an external retrieval service reached as an MCP tool. `metadata.name` is its slug.",
    printcolumn(name = "Source", type_ = "string", json_path = ".status.source", description = "documents or mcp"),
    printcolumn(name = "Documents", type_ = "integer", json_path = ".status.documents", description = "Documents indexed"),
    printcolumn(name = "Chunks", type_ = "integer", json_path = ".status.chunks", description = "Passages indexed"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status", description = "Whether searches are answered"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    validation = Rule::new("size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')")
        .message("a KnowledgeBase's name is its slug and must be a DNS-1123 label (at most 63 lowercase letters, digits and '-')")
        .field_path(".metadata.name"),
)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeBaseSpec {
    /// Human-readable name shown in user interfaces and in the agents' prompts. Defaults to
    /// `metadata.name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    pub display_name: Option<String>,

    /// What the knowledge base holds. Agents read it in their system prompt when choosing what to
    /// search, so say what questions it answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub description: Option<String>,

    /// Where its passages come from: exactly one of `documents` and `mcp`.
    pub source: KnowledgeSource,

    /// Who may search it and who may manage it (the same scopes and rules as an Agent's `share`).
    /// Omitted: only the owner and administrators.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<AgentShare>,

    /// The user id (uid) of its owner, who may always manage it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 128))]
    pub owner: Option<String>,
}

/// The source of a knowledge base: exactly one of `documents` and `mcp`.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.documents) != has(self.mcp)")
        .message("set exactly one of documents and mcp"),
)]
pub struct KnowledgeSource {
    /// Documents the system indexes (full text, BM25, Chinese and English words).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents: Option<DocumentsSource>,

    /// An external retrieval service: one tool of an MCP server, called with the query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpSource>,
}

/// Documents indexed by the system. Without `folder` or `configMap`, they are the files uploaded through
/// the facade (`POST /api/knowledge/{slug}/documents`); with one of them, the documents are that
/// folder's files or that ConfigMap's keys, and uploads are refused.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.folder) || (!self.folder.startsWith('/') && !self.folder.split('/').exists(s, s == '..'))")
        .message("must be a relative path without '..' segments")
        .field_path(".folder"),
    validation = Rule::new("!(has(self.folder) && has(self.configMap))")
        .message("set at most one of folder and configMap"),
)]
pub struct DocumentsSource {
    /// A folder, relative to the documents volume (the chart's `knowledge.sources` claim; the manifests
    /// folder in the local mode), whose `.md`, `.txt`, `.html` and `.pdf` files are the documents.
    /// Sub-folders are not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub folder: Option<String>,

    /// A ConfigMap of the knowledge base's namespace whose keys are the documents: each key a file name
    /// (`guide.md`, `faq.html`), its value (`data`) or bytes (`binaryData`, for PDFs) the document. In
    /// the local mode, a ConfigMap manifest of the manifests folder. The facade must be allowed to read it
    /// (the chart's `knowledge.configMapNames`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapRef>,
}

/// A ConfigMap of the same namespace, by name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapRef {
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// A retrieval service reached as a tool of an MCP server (streamable HTTP).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.url.startsWith('http://') || self.url.startsWith('https://')")
        .message("must be an http:// or https:// URL")
        .field_path(".url"),
)]
pub struct McpSource {
    /// The server's streamable HTTP endpoint, such as `http://qdrant-mcp.search.svc:8000/mcp`.
    #[schemars(length(min = 1, max = 2048))]
    pub url: String,

    /// The tool to call, such as `qdrant-find`.
    #[schemars(length(min = 1, max = 128))]
    pub tool: String,

    /// The tool's argument that takes the query text. Default `query`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub query_argument: Option<String>,

    /// The tool's argument that takes the number of passages wanted; omitted: the number is not passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128))]
    pub top_k_argument: Option<String>,

    /// A Secret key whose value is sent as the `Authorization: Bearer` token (in the local mode, the file
    /// `<data>/secrets/<name>/<key>`, laid out as a Secret mounted as a volume).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret_ref: Option<SecretKeyRef>,
}

/// One key of a Secret of the knowledge base's namespace.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// The key within it.
    #[schemars(length(min = 1, max = 253))]
    pub key: String,
}

/// The observed state of a KnowledgeBase, written by the role that indexes and serves it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeBaseStatus {
    /// The `metadata.generation` the status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `documents` or `mcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,

    /// How many documents are indexed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents: Option<i64>,

    /// How many passages (chunks) are indexed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<i64>,

    /// When indexing last finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_indexed_time: Option<Time>,

    /// The last indexing problem (a document that could not be read), or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_index_error: Option<String>,

    /// `Accepted` (the spec is valid) and `Ready` (searches are answered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
}

impl KnowledgeBaseSpec {
    /// `documents` or `mcp`, the kind of its source.
    pub fn source_kind(&self) -> &'static str {
        if self.source.mcp.is_some() { "mcp" } else { "documents" }
    }

    /// Whether its documents are uploaded through the facade (a `documents` source without a folder or
    /// a ConfigMap).
    pub fn takes_uploads(&self) -> bool {
        self.source.documents.as_ref().is_some_and(|d| d.folder.is_none() && d.config_map.is_none())
    }
}
