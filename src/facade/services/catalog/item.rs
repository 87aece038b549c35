//! What every catalog shares: the kinds it holds ([`CatalogItem`]), how an operation fails
//! ([`CatalogError`]) and why an object cannot be changed ([`Fixed`]).

use serde::Serialize;
use serde::de::DeserializeOwned;

use kube::Resource;
use kube::core::NamespaceResourceScope;

use crate::resources::{Agent, KnowledgeBase, builtin_general_purpose};

/// A kind of object a catalog holds: a namespaced resource of this operator.
pub trait CatalogItem:
    Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + Serialize
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The kind's name in messages (`agent`, `knowledge base`).
    const NOUN: &'static str;

    /// The objects every catalog holds whether or not a manifest or the API defines them (the built-in
    /// `general-purpose` subagent); they cannot be changed or deleted.
    fn builtins() -> Vec<Self> {
        Vec::new()
    }
}

impl CatalogItem for Agent {
    const NOUN: &'static str = "agent";

    fn builtins() -> Vec<Self> {
        vec![builtin_general_purpose()]
    }
}

impl CatalogItem for KnowledgeBase {
    const NOUN: &'static str = "knowledge base";
}

impl CatalogItem for crate::resources::Model {
    const NOUN: &'static str = "model";
}

impl CatalogItem for crate::resources::mcp_server::McpServer {
    const NOUN: &'static str = "MCP server";
}

/// A catalog operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    /// An object with this slug exists already (create).
    #[error("{noun} {slug:?} exists already")]
    Exists {
        /// The kind ([`CatalogItem::NOUN`]).
        noun: &'static str,
        /// The slug.
        slug: String,
    },
    /// There is no object with this slug (replace, delete).
    #[error("{noun} {slug:?} does not exist")]
    Missing {
        /// The kind ([`CatalogItem::NOUN`]).
        noun: &'static str,
        /// The slug.
        slug: String,
    },
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
    /// The caller may not make this write: the API server's RBAC refused the caller the facade
    /// impersonated (its message names the namespace), or the caller has no identity to write as.
    #[error("{0}")]
    Forbidden(String),
}

/// Why an object cannot be changed through the API ([`Catalog::fixed`]); in answers as snake_case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Fixed {
    /// A built-in object (the `general-purpose` subagent) of the local mode.
    BuiltIn,
    /// An object of the local mode's manifests folder: it is changed by editing its file.
    ManifestFile,
}
