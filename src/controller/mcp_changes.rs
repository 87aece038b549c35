//! Tool list changes of McpServers, followed as they happen: after a listing that answered, the
//! discovery keeps one connection open to each server that says it announces changes
//! (`capabilities.tools.listChanged`), and a `notifications/tools/list_changed` on it lists the server
//! again at once rather than at its next `refreshSeconds`.
//!
//! Bounds: one connection per server, opened again when the spec changes or the connection drops (at
//! the next listing); a server whose resource is gone loses its connection at the next reconcile of any
//! server; notifications are coalesced per server (one pending listing at a time), so a flood of them
//! lists a server no more often than the discovery can.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use kube::runtime::reflector::{ObjectRef, Store};
use tokio::sync::mpsc;

use crate::endpoints::mcp_discovery::{ChangeWatch, watch_changes};
use crate::resources::mcp_server::McpServer;

/// How long after a change connection opens its server is listed once more.
pub const SETTLE: std::time::Duration = std::time::Duration::from_secs(5);

/// A server's change connection and the generation of the server it was opened for.
type Watched = (Option<i64>, ChangeWatch);

/// The servers' change connections, and the servers whose change waits for a listing.
pub struct Changes {
    /// The servers announced changed and not listed since.
    pending: Mutex<HashSet<ObjectRef<McpServer>>>,
    /// Where a server announced changed is sent, to be reconciled.
    send: mpsc::UnboundedSender<ObjectRef<McpServer>>,
    /// One connection per server, with the generation it was opened for.
    watches: Mutex<HashMap<ObjectRef<McpServer>, Watched>>,
    /// The discovery's caches of the servers, to tell which are gone.
    stores: Mutex<Vec<Store<McpServer>>>,
}

impl Changes {
    /// No connections yet, and the stream of servers to reconcile because they changed.
    pub fn new() -> (Arc<Changes>, mpsc::UnboundedReceiver<ObjectRef<McpServer>>) {
        let (send, receive) = mpsc::unbounded_channel();
        let changes = Changes { pending: Mutex::default(), send, watches: Mutex::default(), stores: Mutex::default() };
        (Arc::new(changes), receive)
    }

    /// Tells the changes of the servers `store` caches (one per watched namespace).
    pub fn watch_store(&self, store: Store<McpServer>) {
        self.stores.lock().unwrap_or_else(PoisonError::into_inner).push(store);
    }

    /// Notes that the server `at` announced a change: it is reconciled unless a change waits already.
    fn announced(&self, at: &ObjectRef<McpServer>) {
        if self.pending.lock().unwrap_or_else(PoisonError::into_inner).insert(at.clone()) {
            let _ = self.send.send(at.clone());
        }
    }

    /// Whether a change of `at` waits for a listing; the answer takes it.
    pub fn take_pending(&self, at: &ObjectRef<McpServer>) -> bool {
        self.pending.lock().unwrap_or_else(PoisonError::into_inner).remove(at)
    }

    /// Keeps a change connection open to `server` (just listed, with `headers` and `ca_bundle`): a new one
    /// when it has none for its generation or the server no longer answers on it (it restarted). A
    /// server that does not announce changes, or cannot be reached, gets none (its interval still lists
    /// it). A new connection's standing stream opens a moment after it: the server is listed once more
    /// [`SETTLE`] later, so that a change made between the listing and the stream is not missed.
    pub async fn follow(
        self: &Arc<Self>,
        server: &McpServer,
        headers: crate::endpoints::mcp_discovery::Headers,
        ca_bundle: Option<&str>,
    ) {
        let at = ObjectRef::from_obj(server);
        let generation = server.metadata.generation;
        let kept = self.watches.lock().unwrap_or_else(PoisonError::into_inner).remove(&at);
        if let Some((seen, watch)) = kept
            && seen == generation
            && watch.answers(server.spec.timeout()).await
        {
            self.watches.lock().unwrap_or_else(PoisonError::into_inner).insert(at, (seen, watch));
            return;
        }
        let this = Arc::downgrade(self);
        let target = at.clone();
        let changed: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            if let Some(changes) = this.upgrade() {
                changes.announced(&target);
            }
        });
        let url = server.endpoint();
        let watch = watch_changes(&url, headers, ca_bundle, server.spec.timeout(), changed).await;
        let mut watches = self.watches.lock().unwrap_or_else(PoisonError::into_inner);
        match watch {
            Ok(Some(watch)) => {
                watches.insert(at.clone(), (generation, watch));
                let this = Arc::downgrade(self);
                tokio::spawn(async move {
                    tokio::time::sleep(SETTLE).await;
                    if let Some(changes) = this.upgrade() {
                        changes.announced(&at);
                    }
                });
            }
            Ok(None) => {
                watches.remove(&at);
            }
            Err(why) => {
                tracing::debug!(server = %at, error = %why, "cannot follow an MCP server's tool changes; its interval lists it");
                watches.remove(&at);
            }
        }
    }

    /// Closes the connections of servers no store holds any more (deleted).
    pub fn forget_gone(&self) {
        let stores = self.stores.lock().unwrap_or_else(PoisonError::into_inner).clone();
        self.watches
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|at, _| stores.iter().any(|store| store.get(at).is_some()));
    }
}
