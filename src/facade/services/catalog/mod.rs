//! Where the facade's agents and knowledge bases live. In a cluster they are the Agent and KnowledgeBase
//! resources of the facade's namespace, read and written through the Kubernetes API (so the admission
//! webhook and the CRD's rules judge every write too); in the local mode they are the manifests folder,
//! read-only through the API, plus the objects created through the API, kept as manifests in the data
//! folder so they survive a restart. One generic catalog serves both kinds ([`CatalogItem`]).

pub mod fields;
mod item;
mod local;

pub use item::{CatalogError, CatalogItem, Fixed};
pub use local::LocalCatalog;
use local::Origin;

use std::collections::BTreeMap;

use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use super::writers::Writers;
use crate::access::Identity;
use crate::resources::names::FACADE_FIELD_MANAGER;
use crate::resources::{Agent, KnowledgeBase};

/// The agents, by slug.
pub type AgentCatalog = Catalog<Agent>;

/// The knowledge bases, by slug.
pub type KnowledgeCatalog = Catalog<KnowledgeBase>;

/// The objects of one kind, by slug.
#[derive(Clone)]
pub enum Catalog<K: CatalogItem> {
    /// The local mode's.
    Local(LocalCatalog<K>),
    /// A cluster's.
    Cluster(Box<ClusterCatalog<K>>),
}

impl<K: CatalogItem> Catalog<K> {
    /// An in-memory local catalog of `items` (nothing is written anywhere), with the built-ins added
    /// when none of them has their slug. The items are taken as API-created: they can be changed and
    /// deleted.
    pub fn new(items: Vec<K>) -> Self {
        Catalog::Local(LocalCatalog::new(Vec::new(), items, None))
    }

    /// Every object, sorted by slug.
    pub async fn all(&self) -> Result<Vec<K>, CatalogError> {
        match self {
            Catalog::Local(local) => Ok(local.all()),
            Catalog::Cluster(cluster) => cluster.all().await,
        }
    }

    /// The object `slug`, or `None`.
    pub async fn get(&self, slug: &str) -> Result<Option<K>, CatalogError> {
        match self {
            Catalog::Local(local) => Ok(local.get(slug)),
            Catalog::Cluster(cluster) => cluster.get(slug).await,
        }
    }

    /// Adds `item`, named by its `metadata.name`, written for `by` (in a cluster whose facade writes as its
    /// callers, as them). Errors: [`CatalogError::Exists`] when the slug is taken, [`CatalogError::Forbidden`]
    /// when `by` may not.
    pub async fn create(&self, item: K, by: &Identity) -> Result<K, CatalogError> {
        match self {
            Catalog::Local(local) => local.create(item),
            Catalog::Cluster(cluster) => cluster.create(item, by).await,
        }
    }

    /// Replaces the object of the same slug with `item`, which must carry the `resourceVersion` it was
    /// read with in a cluster. Errors: [`CatalogError::Missing`], [`CatalogError::Conflict`].
    pub async fn replace(&self, item: K, by: &Identity) -> Result<K, CatalogError> {
        match self {
            Catalog::Local(local) => local.replace(item),
            Catalog::Cluster(cluster) => cluster.replace(item, by).await,
        }
    }

    /// Deletes the object `slug`. Errors: [`CatalogError::Missing`], [`CatalogError::Conflict`].
    pub async fn delete(&self, slug: &str, by: &Identity) -> Result<(), CatalogError> {
        match self {
            Catalog::Local(local) => local.delete(slug),
            Catalog::Cluster(cluster) => cluster.delete(slug, by).await,
        }
    }

    /// Why the object `slug` cannot be changed or deleted through the API whatever the caller's rights,
    /// or `None` when nothing but the caller's rights stands in the way: in the local mode a built-in and
    /// a manifest file's object are fixed ([`LocalCatalog::replace`] answers them with
    /// [`CatalogError::Conflict`]); in a cluster nothing is (the API server judges each write).
    pub fn fixed(&self, slug: &str) -> Option<Fixed> {
        match self {
            Catalog::Local(local) => match local.read().get(slug).map(|(_, origin)| origin) {
                Some(Origin::Builtin) => Some(Fixed::BuiltIn),
                Some(Origin::Manifest) => Some(Fixed::ManifestFile),
                Some(Origin::Api) | None => None,
            },
            Catalog::Cluster(_) => None,
        }
    }
}

/// A cluster's objects of one kind: the resources of one namespace, through the Kubernetes API. The
/// built-ins are served even before the controller has created their resources.
#[derive(Clone)]
pub struct ClusterCatalog<K: CatalogItem> {
    api: Api<K>,
    namespace: String,
    writers: Writers,
}

impl<K: CatalogItem> ClusterCatalog<K> {
    /// The objects of `namespace`, read and written with the facade's `client`.
    pub fn new(client: kube::Client, namespace: &str) -> Self {
        Self::with_writers(Writers::own(client), namespace)
    }

    /// The objects of `namespace`, read with the facade's client and written with `writers`.
    pub fn with_writers(writers: Writers, namespace: &str) -> Self {
        Self { api: Api::namespaced(writers.own_client().clone(), namespace), namespace: namespace.into(), writers }
    }

    /// The API a write for `by` is made through.
    fn writer(&self, by: &Identity) -> Result<Api<K>, CatalogError> {
        let client = self.writers.for_identity(by).map_err(|e| CatalogError::Forbidden(e.to_string()))?;
        Ok(Api::namespaced(client, &self.namespace))
    }

    /// [`kube_error`], with RBAC's refusal of an impersonated caller passed on as theirs.
    fn write_error(&self, err: kube::Error) -> CatalogError {
        match err {
            kube::Error::Api(status) if status.code == 403 && self.writers.impersonates() => {
                CatalogError::Forbidden(status.message)
            }
            other => kube_error(other),
        }
    }

    async fn all(&self) -> Result<Vec<K>, CatalogError> {
        let mut items: BTreeMap<String, K> = BTreeMap::new();
        let mut params = ListParams::default().limit(500);
        loop {
            let page = self.api.list(&params).await.map_err(kube_error)?;
            items.extend(page.items.into_iter().map(|a| (a.name_any(), a)));
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => break,
            }
        }
        for builtin in K::builtins() {
            items.entry(builtin.name_any()).or_insert(builtin);
        }
        Ok(items.into_values().collect())
    }

    async fn get(&self, slug: &str) -> Result<Option<K>, CatalogError> {
        match self.api.get_opt(slug).await.map_err(kube_error)? {
            None => Ok(K::builtins().into_iter().find(|b| b.name_any() == slug)),
            found => Ok(found),
        }
    }

    fn params() -> PostParams {
        PostParams { dry_run: false, field_manager: Some(FACADE_FIELD_MANAGER.to_string()) }
    }

    async fn create(&self, item: K, by: &Identity) -> Result<K, CatalogError> {
        let slug = item.name_any();
        self.writer(by)?.create(&Self::params(), &item).await.map_err(|err| match err {
            kube::Error::Api(status) if status.code == 409 => CatalogError::Exists { noun: K::NOUN, slug },
            other => self.write_error(other),
        })
    }

    async fn replace(&self, item: K, by: &Identity) -> Result<K, CatalogError> {
        let slug = item.name_any();
        if item.resource_version().is_none() {
            return Err(CatalogError::Conflict(format!(
                "{} {slug:?} has no resource in the cluster to replace",
                K::NOUN
            )));
        }
        self.writer(by)?.replace(&slug, &Self::params(), &item).await.map_err(|err| match err {
            kube::Error::Api(status) if status.code == 404 => {
                CatalogError::Missing { noun: K::NOUN, slug: slug.clone() }
            }
            kube::Error::Api(status) if status.code == 409 => CatalogError::Conflict(format!(
                "{} {slug:?} was changed by somebody else since it was read; read it again and retry",
                K::NOUN
            )),
            other => self.write_error(other),
        })
    }

    async fn delete(&self, slug: &str, by: &Identity) -> Result<(), CatalogError> {
        self.writer(by)?.delete(slug, &DeleteParams::default()).await.map(|_| ()).map_err(|err| match err {
            kube::Error::Api(status) if status.code == 404 => {
                CatalogError::Missing { noun: K::NOUN, slug: slug.to_string() }
            }
            other => self.write_error(other),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(slug: &str) -> Agent {
        Agent::new(slug, Default::default())
    }

    #[tokio::test]
    async fn built_ins_and_manifest_files_are_fixed_and_what_the_api_saved_is_not() {
        let catalog = Catalog::Local(LocalCatalog::new(vec![agent("from-file")], vec![agent("from-api")], None));
        assert_eq!(catalog.fixed("general-purpose"), Some(Fixed::BuiltIn));
        assert_eq!(catalog.fixed("from-file"), Some(Fixed::ManifestFile));
        assert_eq!(catalog.fixed("from-api"), None);
        assert_eq!(catalog.fixed("missing"), None);
        for slug in ["general-purpose", "from-file"] {
            let item = catalog.get(slug).await.expect("read").expect("held");
            let refused = catalog
                .replace(item, &Identity::new("root", crate::access::Role::Superadmin, None))
                .await
                .expect_err("fixed");
            assert!(matches!(refused, CatalogError::Conflict(_)), "{slug}: {refused:?}");
        }
        let item = catalog.get("from-api").await.expect("read").expect("held");
        catalog.replace(item, &Identity::new("root", crate::access::Role::Superadmin, None)).await.expect("not fixed");
    }
}
