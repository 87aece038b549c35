//! A knowledge base as the API shows it ([`KnowledgeBaseView`], [`view`]), and the shapes of its source
//! in the API's spelling.

use kube::ResourceExt;
use serde::{Deserialize, Serialize};

use crate::access::{Identity, Permission, knowledge_permission};
use crate::facade::services::knowledge::{IndexState, Knowledge};
use crate::resources::knowledge_base::{ConfigMapRef, DocumentsSource, McpSource, SecretKeyRef};
use crate::resources::yuxi::YuxiShare;
use crate::resources::{KnowledgeBase, KnowledgeSource};

/// A knowledge base as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KnowledgeBaseView {
    /// Its slug (`metadata.name`).
    pub slug: String,
    /// Its display name.
    pub name: String,
    /// What it holds.
    pub description: String,
    /// Where its passages come from.
    pub source: SourceBody,
    /// Whether documents are uploaded to it (`POST /api/knowledge/{slug}/documents`).
    pub takes_uploads: bool,
    /// Its owner's uid.
    pub created_by: Option<String>,
    /// Who may search and manage it.
    pub share_config: Option<YuxiShare>,
    /// What the caller may do: `read` or `manage`.
    pub permission: Permission,
    /// Its indexing.
    pub status: StatusView,
}

/// A knowledge base's indexing, as the API shows it.
#[derive(Serialize, utoipa::ToSchema)]
pub struct StatusView {
    /// Whether searches are answered.
    pub ready: bool,
    /// Documents indexed.
    pub documents: usize,
    /// Passages indexed.
    pub chunks: u64,
    /// When indexing last finished (RFC 3339), if it has.
    pub indexed_at: Option<String>,
    /// Why it is not ready, or what went wrong with some documents.
    pub error: Option<String>,
}

impl From<IndexState> for StatusView {
    fn from(state: IndexState) -> Self {
        StatusView {
            ready: state.ready,
            documents: state.documents,
            chunks: state.chunks,
            indexed_at: state.indexed_at.map(|t| t.to_string()),
            error: state.error,
        }
    }
}

/// The source of a knowledge base: exactly one of `documents` and `mcp` (neither: uploaded documents).
#[derive(Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceBody {
    /// Documents indexed by the system.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documents: Option<DocumentsBody>,
    /// An MCP server's retrieval tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpBody>,
}

/// Documents indexed by the system: uploaded ones, or (administrators only) a folder's or a ConfigMap's.
#[derive(Serialize, Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DocumentsBody {
    /// A folder of the documents volume (administrators only); absent with `config_map`: uploaded
    /// documents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 512)]
    pub folder: Option<String>,
    /// A ConfigMap whose keys are the documents (administrators only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapRefBody>,
}

/// A ConfigMap of the facade's namespace.
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigMapRefBody {
    /// Its name.
    #[schema(min_length = 1, max_length = 253)]
    pub name: String,
}

/// An MCP server's retrieval tool (administrators only).
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct McpBody {
    /// The streamable HTTP endpoint.
    #[schema(min_length = 1, max_length = 2048)]
    pub url: String,
    /// The tool.
    #[schema(min_length = 1, max_length = 128)]
    pub tool: String,
    /// The argument that takes the query (default `query`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 128)]
    pub query_argument: Option<String>,
    /// The argument that takes the number of passages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_length = 1, max_length = 128)]
    pub top_k_argument: Option<String>,
    /// The Secret key holding the bearer token: `{name, key}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth_secret_ref: Option<SecretRefBody>,
}

/// One key of a Secret.
#[derive(Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretRefBody {
    /// The Secret.
    #[schema(min_length = 1, max_length = 253)]
    pub name: String,
    /// The key.
    #[schema(min_length = 1, max_length = 253)]
    pub key: String,
}

impl From<&KnowledgeSource> for SourceBody {
    fn from(source: &KnowledgeSource) -> Self {
        SourceBody {
            documents: source.documents.as_ref().map(|d| DocumentsBody {
                folder: d.folder.clone(),
                config_map: d.config_map.as_ref().map(|c| ConfigMapRefBody { name: c.name.clone() }),
            }),
            mcp: source.mcp.as_ref().map(|m| McpBody {
                url: m.url.clone(),
                tool: m.tool.clone(),
                query_argument: m.query_argument.clone(),
                top_k_argument: m.top_k_argument.clone(),
                auth_secret_ref: m
                    .auth_secret_ref
                    .as_ref()
                    .map(|s| SecretRefBody { name: s.name.clone(), key: s.key.clone() }),
            }),
        }
    }
}

impl From<SourceBody> for KnowledgeSource {
    fn from(body: SourceBody) -> Self {
        let mcp = body.mcp.map(|m| McpSource {
            url: m.url,
            tool: m.tool,
            query_argument: m.query_argument,
            top_k_argument: m.top_k_argument,
            auth_secret_ref: m.auth_secret_ref.map(|s| SecretKeyRef { name: s.name, key: s.key }),
        });
        let documents = match (&mcp, body.documents) {
            (Some(_), None) => None,
            (_, documents) => {
                let (folder, config_map) = documents.map(|d| (d.folder, d.config_map)).unwrap_or_default();
                let config_map = config_map.map(|c| ConfigMapRef { name: c.name });
                Some(DocumentsSource { folder, config_map })
            }
        };
        KnowledgeSource { documents, mcp }
    }
}

/// The view of `kb` for `who`.
pub fn view(kb: &KnowledgeBase, who: &Identity, knowledge: &Knowledge) -> KnowledgeBaseView {
    KnowledgeBaseView {
        slug: kb.name_any(),
        name: kb.spec.display_name.clone().unwrap_or_else(|| kb.name_any()),
        description: kb.spec.description.clone().unwrap_or_default(),
        source: SourceBody::from(&kb.spec.source),
        takes_uploads: kb.spec.takes_uploads(),
        created_by: kb.spec.owner.clone(),
        share_config: kb.spec.share.as_ref().map(YuxiShare::from),
        permission: knowledge_permission(who, kb),
        status: knowledge.state(kb).into(),
    }
}

/// The answer of `GET /api/knowledge`.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KnowledgeList {
    /// The knowledge bases the caller may search, by slug.
    pub knowledge_bases: Vec<KnowledgeBaseView>,
}

/// One knowledge base.
#[derive(Serialize, utoipa::ToSchema)]
pub struct KnowledgeAnswer {
    /// It.
    pub knowledge_base: KnowledgeBaseView,
}
