//! The local mode's catalog of one kind: the manifests folder's objects, read-only through the API and
//! replaced as the folder changes, plus those created through the API, kept as manifests in the data
//! folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use kube::ResourceExt;
use serde::Serialize;

use super::item::{CatalogError, CatalogItem};

/// Where a local object came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Origin {
    /// A built-in ([`CatalogItem::builtins`]).
    Builtin,
    /// A file of the manifests folder: read-only through the API.
    Manifest,
    /// The API (or a test).
    Api,
}

type Entries<K> = BTreeMap<String, (K, Origin)>;

/// The local mode's objects of one kind: the manifests folder's plus those created through the API, the
/// latter kept as `<slug>.yaml` manifests (the YAML `kubectl apply` takes) in a folder of the data folder.
#[derive(Clone)]
pub struct LocalCatalog<K: CatalogItem> {
    items: Arc<RwLock<Entries<K>>>,
    saved_in: Option<PathBuf>,
}

impl<K: CatalogItem> LocalCatalog<K> {
    /// A catalog of the manifests folder's objects and of the objects saved earlier in `saved_in` (where
    /// the API's changes are written; `None` keeps them in memory). A saved object with the slug of a
    /// manifest's is ignored: the manifests folder wins. The built-ins are added unless a manifest
    /// defines their slug.
    pub fn new(manifests: Vec<K>, saved: Vec<K>, saved_in: Option<PathBuf>) -> Self {
        let mut map = BTreeMap::new();
        for item in saved {
            map.insert(item.name_any(), (item, Origin::Api));
        }
        for item in manifests {
            if map.insert(item.name_any(), (item.clone(), Origin::Manifest)).is_some() {
                tracing::warn!(slug = %item.name_any(), kind = K::NOUN, "a saved object has the slug of a manifest's; the manifest's is used");
            }
        }
        for builtin in K::builtins() {
            map.entry(builtin.name_any()).or_insert_with(|| (builtin, Origin::Builtin));
        }
        Self { items: Arc::new(RwLock::new(map)), saved_in }
    }

    /// Puts `item` in place of the object with its slug, which keeps its origin (a manifest's stays
    /// read-only), and saves nothing: how the local mode keeps the status of its manifests' objects
    /// current. An item with a slug the catalog does not hold is dropped.
    pub fn refresh(&self, item: K) {
        if let Some(entry) = self.write().get_mut(&item.name_any()) {
            entry.0 = item;
        }
    }

    /// Puts `manifests` in force as the manifests folder's objects, as the local mode does when the
    /// folder changes: a slug no manifest defines any more goes (a built-in of its slug comes back), a
    /// new or changed one is put in place; a manifest takes the slug of an object created through the
    /// API over it, as at start (the saved file stays, and is served again when the manifest goes at the
    /// next start). Returns the slugs that changed, were added or went.
    pub fn set_manifests(&self, manifests: Vec<K>) -> Vec<String> {
        let mut items = self.write();
        let mut changed = Vec::new();
        let wanted: BTreeMap<String, K> = manifests.into_iter().map(|item| (item.name_any(), item)).collect();
        let gone: Vec<String> = items
            .iter()
            .filter(|(slug, (_, origin))| *origin == Origin::Manifest && !wanted.contains_key(*slug))
            .map(|(slug, _)| slug.clone())
            .collect();
        for slug in gone {
            items.remove(&slug);
            if let Some(builtin) = K::builtins().into_iter().find(|b| b.name_any() == slug) {
                items.insert(slug.clone(), (builtin, Origin::Builtin));
            }
            changed.push(slug);
        }
        for (slug, item) in wanted {
            match items.get(&slug) {
                Some((held, Origin::Manifest)) if same(held, &item) => continue,
                Some((_, Origin::Api)) => {
                    tracing::warn!(slug = %slug, kind = K::NOUN, "a manifest now has the slug of an object created through the API; the manifest's is used")
                }
                _ => {}
            }
            items.insert(slug.clone(), (item, Origin::Manifest));
            changed.push(slug);
        }
        changed
    }

    /// The objects created through the API (not the manifests' or the built-ins).
    pub fn api_items(&self) -> Vec<K> {
        self.read().values().filter(|(_, origin)| *origin == Origin::Api).map(|(item, _)| item.clone()).collect()
    }

    pub(super) fn read(&self) -> std::sync::RwLockReadGuard<'_, Entries<K>> {
        self.items.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Entries<K>> {
        self.items.write().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn all(&self) -> Vec<K> {
        self.read().values().map(|(item, _)| item.clone()).collect()
    }

    pub(super) fn get(&self, slug: &str) -> Option<K> {
        self.read().get(slug).map(|(item, _)| item.clone())
    }

    pub(super) fn create(&self, item: K) -> Result<K, CatalogError> {
        let slug = item.name_any();
        let mut items = self.write();
        if items.contains_key(&slug) {
            return Err(CatalogError::Exists { noun: K::NOUN, slug });
        }
        self.save(&slug, &item)?;
        items.insert(slug, (item.clone(), Origin::Api));
        Ok(item)
    }

    pub(super) fn replace(&self, item: K) -> Result<K, CatalogError> {
        let slug = item.name_any();
        let mut items = self.write();
        Self::changeable(items.get(&slug).map(|(_, origin)| origin), &slug)?;
        self.save(&slug, &item)?;
        items.insert(slug, (item.clone(), Origin::Api));
        Ok(item)
    }

    pub(super) fn delete(&self, slug: &str) -> Result<(), CatalogError> {
        let mut items = self.write();
        Self::changeable(items.get(slug).map(|(_, origin)| origin), slug)?;
        if let Some(dir) = &self.saved_in {
            let file = dir.join(format!("{slug}.yaml"));
            match std::fs::remove_file(&file) {
                Ok(()) => {}
                Err(err) if err.kind() == std::io::ErrorKind::NotFound => {}
                Err(err) => return Err(CatalogError::Unavailable(format!("cannot remove {}: {err}", file.display()))),
            }
        }
        items.remove(slug);
        Ok(())
    }

    fn changeable(origin: Option<&Origin>, slug: &str) -> Result<(), CatalogError> {
        match origin {
            None => Err(CatalogError::Missing { noun: K::NOUN, slug: slug.to_string() }),
            Some(Origin::Api) => Ok(()),
            Some(Origin::Builtin) => {
                Err(CatalogError::Conflict(format!("the built-in {} {slug} cannot be changed or deleted", K::NOUN)))
            }
            Some(Origin::Manifest) => Err(CatalogError::Conflict(format!(
                "{} {slug:?} is defined in the manifests folder; change or remove it there",
                K::NOUN
            ))),
        }
    }

    /// Writes the object's manifest, through a temporary file renamed into place so a crash leaves the
    /// old file or the new one, never half of one.
    fn save(&self, slug: &str, item: &K) -> Result<(), CatalogError> {
        let Some(dir) = &self.saved_in else { return Ok(()) };
        let unavailable = |what: &Path, err: &dyn std::fmt::Display| {
            CatalogError::Unavailable(format!("cannot save {} {slug:?} in {}: {err}", K::NOUN, what.display()))
        };
        // Its own folder is made when missing, never the data folder around it: a data folder deleted
        // under the local mode is not silently begun again with this one object.
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(err) => return Err(unavailable(dir, &err)),
        }
        let text = serde_norway::to_string(item).map_err(|e| unavailable(dir, &e))?;
        let file = dir.join(format!("{slug}.yaml"));
        let partial = dir.join(format!(".{slug}.yaml.partial"));
        std::fs::write(&partial, text).map_err(|e| unavailable(&partial, &e))?;
        std::fs::rename(&partial, &file).map_err(|e| unavailable(&file, &e))
    }
}

/// Whether two objects serialize alike but for their status (which the local mode writes itself, as
/// an MCP server's discovered tools).
fn same<K: Serialize>(a: &K, b: &K) -> bool {
    let without_status = |item: &K| {
        let mut value = serde_json::to_value(item).ok()?;
        value.as_object_mut()?.remove("status");
        Some(value)
    };
    without_status(a) == without_status(b)
}
