//! Who calls `/mcp` ([`McpCaller`], as the authentication found it) and the parent of a session's calls
//! ([`SessionParent`]).

use crate::facade::http::auth::ParentCaller;

/// Who calls, as [`authenticate`](super::authenticate::authenticate) found it, and the agent the URL names.
#[derive(Clone)]
pub struct McpCaller {
    /// The caller: a user, or a run with its grant.
    pub caller: ParentCaller,
    /// `?agent=<slug>`, when given.
    pub agent: Option<String>,
}

/// The parent run and thread of a session's calls, and who it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionParent {
    /// The user who opened the session.
    pub uid: String,
    /// The agent whose subagents it reaches.
    pub agent: String,
    /// The parent run id of its children.
    pub run_id: String,
    /// The parent thread.
    pub thread_id: String,
}
