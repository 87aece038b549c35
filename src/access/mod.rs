//! Who may see and manage which agent and knowledge base, which knowledge bases a run may search, and which subagents a parent may call (pure; Yuxi's share rules,
//! Yuxi's agent model, and its subagent design "如何让主 Agent 调用子智能体"; docs/concepts/agents.md).
//!
//! - a superadmin manages every agent; the owner (`spec.owner`) manages their own;
//! - a user matched by `manageScope` manages, one matched by `readScope` reads;
//! - an agent with no share scopes is seen by its owner and superadmins only;
//! - only admins and superadmins may save `Global` or `Department` scopes;
//! - the built-in `general-purpose` subagent is always visible.

use kube::ResourceExt;
use serde::{Deserialize, Serialize};

use crate::resources::{AccessLevel, Agent, AgentShare, GENERAL_PURPOSE, KnowledgeBase, ShareScope};

/// A user's role (Yuxi: `user`, `admin`, `superadmin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// An ordinary user.
    User,
    /// May save Global and Department share scopes.
    Admin,
    /// May also manage every agent.
    Superadmin,
}

/// Who is asking.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// The user id.
    pub uid: String,
    /// The role.
    pub role: Role,
    /// The user's department, if any.
    #[serde(default)]
    pub department_id: Option<i64>,
    /// The Kubernetes user the caller is, when their credentials name one (TokenReview, an OIDC
    /// issuer the cluster trusts): whom a facade that writes as its callers impersonates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub principal: Option<Principal>,
}

impl Identity {
    /// A caller with no Kubernetes identity (a users file's user, say).
    pub fn new(uid: impl Into<String>, role: Role, department_id: Option<i64>) -> Identity {
        Identity { uid: uid.into(), role, department_id, principal: None }
    }
}

/// A Kubernetes user, as the API server authenticates one (`user.username`, `uid`, `groups`): the
/// subject of `Impersonate-User`, `Impersonate-Uid` and `Impersonate-Group`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Principal {
    /// The username (`oidc:alice`, `system:serviceaccount:team-a:ci`).
    pub username: String,
    /// The user's uid, when the authenticator gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// The groups, without `system:authenticated` (the API server adds it to every impersonated user).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// The prefix of the identities Kubernetes keeps for itself (`system:masters`, `system:nodes`,
/// `system:serviceaccount:…`, `system:kube-controller-manager`).
pub const SYSTEM_PREFIX: &str = "system:";

impl Principal {
    /// Who the facade may write as: this user with only the groups it may assert. Errors: the reason
    /// when the user itself is one of Kubernetes' own (`system:`), which is never impersonated. Groups
    /// named `system:…` are dropped (the API server gives `system:authenticated` itself).
    pub fn impersonable(&self) -> Result<Principal, String> {
        if self.username.is_empty() || self.username.starts_with(SYSTEM_PREFIX) {
            return Err(format!(
                "{:?} is an identity of Kubernetes itself (a service account or a component), which this facade never writes as",
                self.username
            ));
        }
        let groups = self.groups.iter().filter(|g| !g.starts_with(SYSTEM_PREFIX)).cloned().collect();
        Ok(Principal { username: self.username.clone(), uid: self.uid.clone(), groups })
    }
}

/// What a user may do with an agent, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// Neither see nor use it.
    None,
    /// See and use it.
    Read,
    /// Also edit and delete it.
    Manage,
}

/// Whether `who` is in `scope`.
pub fn in_scope(who: &Identity, scope: &ShareScope) -> bool {
    match scope.access_level {
        AccessLevel::Global => true,
        AccessLevel::Department => who.department_id.is_some_and(|d| scope.department_ids.contains(&d)),
        AccessLevel::User => scope.user_uids.contains(&who.uid),
    }
}

/// What `who` may do with `agent`.
pub fn permission(who: &Identity, agent: &Agent) -> Permission {
    match shared_permission(who, agent.spec.owner.as_deref(), agent.spec.share.as_ref()) {
        Permission::None if agent.name_any() == GENERAL_PURPOSE => Permission::Read,
        found => found,
    }
}

/// What `who` may do with the knowledge base `kb`: the Agents' rules (its owner and superadmins manage
/// it, `manageScope` manages, `readScope` searches).
pub fn knowledge_permission(who: &Identity, kb: &KnowledgeBase) -> Permission {
    shared_permission(who, kb.spec.owner.as_deref(), kb.spec.share.as_ref())
}

/// What `who` may do with the Model `model`: the Agents' rules. `Read` is what running on it takes;
/// a Model without share scopes serves its owner and superadmins only.
pub fn model_permission(who: &Identity, model: &crate::resources::Model) -> Permission {
    shared_permission(who, model.spec.owner.as_deref(), model.spec.share.as_ref())
}

/// What `who` may do with the McpServer `server`: read (use it in their agents) when it has no share
/// scopes (every user of the namespace), else the Agents' rules.
pub fn mcp_server_permission(who: &Identity, server: &crate::resources::mcp_server::McpServer) -> Permission {
    match &server.spec.share {
        None => Permission::Read,
        Some(share) => shared_permission(who, None, Some(share)),
    }
}

/// The share rules of an object with `owner` and `share`.
fn shared_permission(who: &Identity, owner: Option<&str>, share: Option<&AgentShare>) -> Permission {
    if who.role == Role::Superadmin || owner == Some(who.uid.as_str()) {
        return Permission::Manage;
    }
    if share.and_then(|s| s.manage_scope.as_ref()).is_some_and(|scope| in_scope(who, scope)) {
        return Permission::Manage;
    }
    if share.and_then(|s| s.read_scope.as_ref()).is_some_and(|scope| in_scope(who, scope)) {
        return Permission::Read;
    }
    Permission::None
}

/// Whether `who` may save `scope` on an agent: `User` scopes anyone, `Global` and `Department` scopes
/// admins and superadmins only.
pub fn may_save_scope(who: &Identity, scope: &ShareScope) -> bool {
    scope.access_level == AccessLevel::User || who.role >= Role::Admin
}

/// The subagents `parent` may call for `who`, by slug: its `context.subagents` list, kept to the Agents
/// that exist in `agents`, are subagents, and `who` may read. Absent or empty, the list is the readable
/// subagents that `who` owns or that nobody owns (the platform's: applied as manifests, and the built-in
/// `general-purpose`); a subagent another user shared is called only when a list names it, so sharing one
/// cannot slip the sharer's prompt into someone else's runs. A subagent parent gets none (no nesting).
/// Listed order is kept; otherwise sorted by slug.
pub fn allowed_subagents<'a>(parent: &Agent, agents: &'a [Agent], who: &Identity) -> Vec<&'a Agent> {
    if parent.spec.is_subagent() {
        return Vec::new();
    }
    let usable = |agent: &&Agent| agent.spec.is_subagent() && permission(who, agent) >= Permission::Read;
    let listed = parent.spec.context.as_ref().and_then(|c| c.subagents.as_ref()).filter(|l| !l.is_empty());
    match listed {
        Some(slugs) => {
            slugs.iter().filter_map(|slug| agents.iter().find(|a| a.name_any() == *slug)).filter(usable).collect()
        }
        None => {
            let implicit = |agent: &&Agent| agent.spec.owner.as_deref().is_none_or(|owner| owner == who.uid);
            let mut all: Vec<&Agent> = agents.iter().filter(usable).filter(implicit).collect();
            all.sort_by_key(|a| a.name_any());
            all
        }
    }
}

/// The knowledge bases a run of `agent` for `who` may search (Yuxi's list rule for
/// `context.knowledges`): absent, every knowledge base of `kbs` that `who` may read, sorted by slug; a
/// list (even an empty one), those it names that exist and `who` may read, in its order. A knowledge base
/// `who` may not read is never among them, whatever the list says.
pub fn allowed_knowledge_bases<'a>(agent: &Agent, kbs: &'a [KnowledgeBase], who: &Identity) -> Vec<&'a KnowledgeBase> {
    let readable = |kb: &&KnowledgeBase| knowledge_permission(who, kb) >= Permission::Read;
    match agent.spec.context.as_ref().and_then(|c| c.knowledges.as_ref()) {
        Some(slugs) => {
            slugs.iter().filter_map(|slug| kbs.iter().find(|kb| kb.name_any() == *slug)).filter(readable).collect()
        }
        None => {
            let mut all: Vec<&KnowledgeBase> = kbs.iter().filter(readable).collect();
            all.sort_by_key(|kb| kb.name_any());
            all
        }
    }
}

/// The uid of a Kubernetes username: the username itself when it is an id of
/// [`is_valid_id`](crate::resources::thread_id::is_valid_id) of at most 63 characters that does not end
/// like a mapped uid (`-` and 16 hex digits); otherwise (`system:serviceaccount:ns:name`,
/// `alice@example.com`, or a name that looks mapped) its characters outside the id alphabet become `-`,
/// it is cut to 46 characters, and `-` and the first 16 hex digits of the name's SHA-256 are appended.
/// So two names never share a uid: a name kept as it is never has the mapped form, and two mapped names
/// differ in 64 bits of their hashes. The facade (TokenReview) and the admission webhook (who creates an
/// AgentRun) map users by this one rule.
pub fn uid_of(username: &str) -> String {
    let looks_mapped = username.len() > 17
        && username.as_bytes()[username.len() - 17] == b'-'
        && username[username.len() - 16..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if crate::resources::thread_id::is_valid_id(username) && username.len() <= 63 && !looks_mapped {
        return username.to_string();
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(username.as_bytes());
    let mut safe: String = username
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' })
        .take(46)
        .collect();
    safe = safe.trim_start_matches(|c: char| !c.is_ascii_alphanumeric()).to_string();
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    if safe.is_empty() { format!("u-{hex}") } else { format!("{safe}-{hex}") }
}

/// Who may create AgentRuns that run for a user other than themselves (the facade's service account,
/// say). Anyone else's AgentRun runs as its creator: the admission webhook stamps or checks `spec.uid`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunCreators {
    /// Kubernetes usernames, such as `system:serviceaccount:yuxi-system:yuxi-operator-api`.
    pub usernames: Vec<String>,
    /// Kubernetes groups whose members may.
    pub groups: Vec<String>,
}

impl RunCreators {
    /// Whether the Kubernetes user `username` in `groups` may create runs for other users.
    pub fn includes(&self, username: &str, groups: &[String]) -> bool {
        self.usernames.iter().any(|u| u == username) || groups.iter().any(|g| self.groups.contains(g))
    }
}

/// Who an AgentRun created by the Kubernetes user `username` (in `groups`) runs as, by its `spec.uid`:
///
/// - a trusted creator ([`RunCreators::includes`]): whatever `spec.uid` says (`Ok(None)`: keep it);
/// - anyone else: their own uid ([`uid_of`]). `Ok(Some(uid))` when `spec.uid` is absent (the mutating
///   webhook stamps it), `Ok(None)` when it is already theirs.
///
/// Errors: the message for `spec.uid` when it names another user, or when `stamp` is false (the
/// validating webhook: the mutating one would have stamped it) and it is absent, so the run would
/// otherwise fall back to the sandbox's default user.
pub fn run_owner(
    spec_uid: Option<&str>,
    username: &str,
    groups: &[String],
    trusted: &RunCreators,
    stamp: bool,
) -> Result<Option<String>, String> {
    if trusted.includes(username, groups) {
        return Ok(None);
    }
    let own = uid_of(username);
    match spec_uid {
        Some(uid) if uid == own => Ok(None),
        Some(uid) => Err(format!(
            "{uid:?} is not your user id: an AgentRun created by {username:?} runs as {own:?}; only the run creators the webhook is configured with (--run-creator, --run-creator-group) may create runs for other users"
        )),
        None if stamp => Ok(Some(own)),
        None => Err(format!(
            "is required: an AgentRun created by {username:?} runs as {own:?} (the mutating webhook sets it when it is omitted)"
        )),
    }
}

#[cfg(test)]
mod tests;
