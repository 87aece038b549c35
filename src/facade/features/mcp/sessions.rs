//! Who owns each MCP session, and how many sessions each user and this facade replica hold.
//!
//! A session belongs to the caller that opened it: the user, or the run for a run token. Every
//! request naming a session (a call, `GET` for its stream, `DELETE`, a notification) is checked
//! against its owner, and another caller's request is handed on as if it named a session that does
//! not exist, so it is answered exactly as one (404 `Session not found`; `DELETE` is a no-op).
//!
//! Opening a session takes a place counted per user (`max_mcp_sessions_per_user`) and per replica
//! (`max_mcp_sessions`); beyond either, 429 naming it. A place is held from the request that opens
//! the session until the session ends: deleted, or dropped by the server library after its idle
//! time (5 minutes), which is seen when places are next counted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use crate::facade::http::auth::ParentCaller;
use crate::facade::http::error::ApiError;
use crate::facade::http::limits::{Limits, RETRY_AFTER_SECONDS};

/// A session id no session has: a stranger's request names it instead of the session it named.
pub const NO_SESSION: &str = "no-such-session";

/// The owner of sessions: `user:<uid>` or `run:<run id>`, and the user either acts for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// Who may use the session.
    pub principal: String,
    /// The user it counts against.
    pub uid: String,
}

impl Owner {
    /// The owner of sessions `caller` opens.
    pub fn of(caller: &ParentCaller) -> Self {
        let principal = match &caller.run {
            Some(run) => format!("run:{}", run.run_id),
            None => format!("user:{}", caller.who.uid),
        };
        Self { principal, uid: caller.who.uid.clone() }
    }
}

/// The sessions of one facade replica and their owners.
pub struct Sessions {
    manager: Arc<LocalSessionManager>,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    /// Open sessions by id.
    owners: HashMap<String, Owner>,
    /// Places taken by requests that may open a session, by user, not yet settled.
    opening: HashMap<String, usize>,
}

impl Inner {
    fn held_by(&self, uid: &str) -> usize {
        self.owners.values().filter(|o| o.uid == uid).count() + self.opening.get(uid).copied().unwrap_or(0)
    }

    fn held(&self) -> usize {
        self.owners.len() + self.opening.values().sum::<usize>()
    }
}

/// A place taken for a session a request may open: kept for the session by [`Place::settle`], given
/// back when dropped unsettled (the request opened none, or its client went away).
#[must_use]
pub struct Place {
    sessions: Arc<Sessions>,
    owner: Owner,
    opened: Option<String>,
}

impl Place {
    /// Keeps the place for the session `opened` when the request opened one, else gives it back.
    pub fn settle(mut self, opened: Option<&str>) {
        self.opened = opened.map(str::to_string);
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut inner = self.sessions.inner.lock().expect("sessions lock");
        if let Some(count) = inner.opening.get_mut(&self.owner.uid) {
            *count -= 1;
            if *count == 0 {
                inner.opening.remove(&self.owner.uid);
            }
        }
        if let Some(id) = self.opened.take() {
            inner.owners.insert(id, self.owner.clone());
        }
    }
}

impl Sessions {
    /// The sessions of `manager`, the server library's session store.
    pub fn new(manager: Arc<LocalSessionManager>) -> Self {
        Self { manager, inner: Mutex::new(Inner::default()) }
    }

    /// Whether `owner` may use the session `id`: true when it is theirs or unknown here (the server
    /// library answers an unknown one), false when it is another caller's.
    pub fn may_use(&self, id: &str, owner: &Owner) -> bool {
        let inner = self.inner.lock().expect("sessions lock");
        inner.owners.get(id).is_none_or(|o| o.principal == owner.principal)
    }

    /// Takes a place for a session `owner` may open. Errors: 429 naming `max_mcp_sessions_per_user`
    /// or `max_mcp_sessions` when that count is full (counting after the sessions that ended are
    /// forgotten).
    pub async fn take_place(self: &Arc<Self>, owner: &Owner, limits: &Limits) -> Result<Place, ApiError> {
        self.forget_ended().await;
        let mut inner = self.inner.lock().expect("sessions lock");
        let (limit, message) = if inner.held_by(&owner.uid) >= limits.mcp_sessions_per_user {
            (
                "max_mcp_sessions_per_user",
                format!(
                    "you have {} MCP sessions open, the most allowed; end one (DELETE /mcp) or let it idle out",
                    limits.mcp_sessions_per_user
                ),
            )
        } else if inner.held() >= limits.mcp_sessions {
            (
                "max_mcp_sessions",
                format!("{} MCP sessions are open on this server, the most allowed", limits.mcp_sessions),
            )
        } else {
            *inner.opening.entry(owner.uid.clone()).or_default() += 1;
            return Ok(Place { sessions: self.clone(), owner: owner.clone(), opened: None });
        };
        Err(ApiError::Limited { limit: limit.into(), message, retry_after: RETRY_AFTER_SECONDS })
    }

    /// Forgets the session `id` (it was deleted).
    pub fn forget(&self, id: &str) {
        self.inner.lock().expect("sessions lock").owners.remove(id);
    }

    /// Forgets the sessions the server library no longer has (idled out).
    async fn forget_ended(&self) {
        let ids: Vec<String> = self.inner.lock().expect("sessions lock").owners.keys().cloned().collect();
        let mut ended = Vec::new();
        for id in ids {
            if !self.manager.has_session(&Arc::from(id.as_str())).await.unwrap_or(false) {
                ended.push(id);
            }
        }
        let mut inner = self.inner.lock().expect("sessions lock");
        for id in ended {
            inner.owners.remove(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(principal: &str, uid: &str) -> Owner {
        Owner { principal: principal.into(), uid: uid.into() }
    }

    #[tokio::test]
    async fn places_are_counted_per_user_and_in_all_while_sessions_open() {
        let sessions = Arc::new(Sessions::new(Arc::new(LocalSessionManager::default())));
        let limits = Limits { mcp_sessions_per_user: 2, mcp_sessions: 3, ..Limits::default() };
        let alice = owner("user:alice", "alice");
        let first = sessions.take_place(&alice, &limits).await.expect("first");
        let second = sessions.take_place(&alice, &limits).await.expect("second");
        // Places taken and not yet settled count: a burst cannot overshoot.
        let full = sessions.take_place(&alice, &limits).await.err().expect("full");
        assert!(matches!(&full, ApiError::Limited { limit, .. } if limit == "max_mcp_sessions_per_user"), "{full}");
        // A request that opened no session gives its place back.
        first.settle(None);
        let third = sessions.take_place(&alice, &limits).await.expect("a place again");
        let bob = sessions.take_place(&owner("user:bob", "bob"), &limits).await.expect("bob's");
        let all = sessions.take_place(&owner("user:carol", "carol"), &limits).await.err().expect("all full");
        assert!(matches!(&all, ApiError::Limited { limit, .. } if limit == "max_mcp_sessions"), "{all}");
        // A place dropped unsettled (its client went away) is given back too.
        drop(second);
        let fourth = sessions.take_place(&owner("user:carol", "carol"), &limits).await.expect("a place given back");
        for place in [third, bob, fourth] {
            place.settle(None);
        }
    }

    #[tokio::test]
    async fn a_session_is_usable_by_its_owner_only_and_ended_ones_stop_counting() {
        let sessions = Arc::new(Sessions::new(Arc::new(LocalSessionManager::default())));
        let limits = Limits { mcp_sessions_per_user: 1, ..Limits::default() };
        let alice = owner("user:alice", "alice");
        let place = sessions.take_place(&alice, &limits).await.expect("place");
        place.settle(Some("s1"));
        assert!(sessions.may_use("s1", &alice));
        assert!(!sessions.may_use("s1", &owner("user:bob", "bob")));
        // Her run acts for her but is another caller.
        assert!(!sessions.may_use("s1", &owner("run:r1", "alice")));
        assert!(sessions.may_use("unknown", &owner("user:bob", "bob")));
        // The server library has no session "s1" (it idled out): it no longer counts.
        let again = sessions.take_place(&alice, &limits).await.expect("s1 ended");
        again.settle(None);
        assert!(sessions.may_use("s1", &owner("user:bob", "bob")), "forgotten");
    }
}
