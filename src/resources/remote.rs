//! A subagent that runs elsewhere: `spec.remote.a2a` of an Agent names an agent served over the
//! Agent2Agent protocol (its card URL, the headers that authenticate to it, its time limits). A
//! delegation to it is an AgentRun like any other; its runner sends the task to the remote agent and
//! reports the remote task's updates, answer, failure and cancel as the run's (docs/concepts/a2a.md).

use kube::KubeSchema;
use serde::{Deserialize, Serialize};

use super::knowledge_base::SecretKeyRef;

/// The longest a remote task may take, in seconds, and the default limit.
pub const MAX_REMOTE_TIMEOUT_SECONDS: u32 = 86_400;
/// How long a remote task may take when the Agent names no limit, in seconds.
pub const DEFAULT_REMOTE_TIMEOUT_SECONDS: u32 = 1800;
/// How long a fetched card is used before it is fetched again, in seconds, when the Agent names none.
pub const DEFAULT_CARD_TTL_SECONDS: u32 = 300;
/// The most headers a remote agent is sent.
pub const MAX_REMOTE_HEADERS: usize = 16;

/// Where a remote subagent runs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("has(self.a2a)").message("name the remote agent: a2a").field_path(".a2a"))]
pub struct AgentRemote {
    /// An agent served over A2A (1.0, JSON-RPC binding).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub a2a: Option<RemoteA2a>,
}

/// An agent served over A2A.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.cardUrl.startsWith('https://') || self.cardUrl.startsWith('http://')")
        .message("must be an http:// or https:// URL of the agent's card")
        .field_path(".cardUrl"),
)]
pub struct RemoteA2a {
    /// The URL of the agent's card (`https://agents.example.com/a2a/team/helper/.well-known/agent-card.json`);
    /// the card names the URL its requests go to.
    #[schemars(length(min = 1, max = 2048))]
    pub card_url: String,

    /// Headers sent with every request to the agent (its card's too), such as `Authorization`; each
    /// from exactly one of `value`, `secretKeyRef` (in a cluster: given to the runner container only,
    /// never to the sandbox) or `env` (a variable of the runner).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub headers: Vec<RemoteHeader>,

    /// The longest the remote task may take, in seconds, 1 to 86400 (default 1800): past it the run
    /// cancels the remote task and fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout_seconds: Option<u32>,

    /// How long the fetched card is used before it is fetched again, in seconds, 0 to 86400 (default
    /// 300; 0 fetches it for every run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86400))]
    pub card_ttl_seconds: Option<u32>,
}

/// One header sent to a remote agent or an MCP server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("[has(self.value), has(self.secretKeyRef), has(self.env), has(self.caller)].filter(x, x).size() == 1")
        .message("give exactly one of value, secretKeyRef, env, caller")
        .field_path(".value"),
)]
pub struct RemoteHeader {
    /// The header's name, an HTTP token (`Authorization`).
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"))]
    pub name: String,

    /// The value in plain text: never a credential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub value: Option<String>,

    /// A key of a Secret of the Agent's namespace holding the value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKeyRef>,

    /// A variable of the runner's environment holding the value (the local mode's way to a credential).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 128), regex(pattern = r"^[A-Za-z_][A-Za-z0-9_]*$"))]
    pub env: Option<String>,

    /// A token of the run's own user for this audience (an MCP server's header only), asked of the
    /// facade with the run's token (docs/concepts/mcp.md#authenticating-to-mcp-servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<CallerAudience>,

    /// Put before the value, such as `Bearer `.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub prefix: Option<String>,
}

/// The audience a user's token is asked for.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CallerAudience {
    /// The audience (the server's `aud`).
    #[schemars(length(min = 1, max = 256))]
    pub audience: String,
}

/// The runner container's variable holding the value of remote header `index` read from a Secret.
pub fn header_env_name(index: usize) -> String {
    format!("YUXI_REMOTE_HEADER_{index}")
}
