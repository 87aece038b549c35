//! What a runner is given: the environment names, the paths of its inputs in a pod, the MCP server file,
//! and the defaults of an Agent's empty context. The controller's pod builder and the local launcher
//! write these; the runner reads them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The environment variables a runner reads. Secrets among them (the store URL with its password, the
/// model key, the run token) are never printed and never passed to `execute`.
pub mod env {
    /// The Redis URL, `redis://[:password@]host:port[/db]` (exactly one of this and [`STORE_SOCKET`]).
    pub const REDIS_URL: &str = "YUXI_REDIS_URL";
    /// `true`: use a Redis that answers clients without a password, with a warning
    /// (`--allow-unauthenticated-store`); every role refuses one otherwise.
    pub const ALLOW_UNAUTHENTICATED_STORE: &str = "YUXI_ALLOW_UNAUTHENTICATED_STORE";
    /// `true`: `execute` runs commands unconfined when bubblewrap cannot confine them (the local mode's
    /// `--unconfined-sandbox`); they are refused otherwise.
    pub const UNCONFINED_SANDBOX: &str = "YUXI_UNCONFINED_SANDBOX";
    /// The local mode's store socket (exactly one of this and [`REDIS_URL`]).
    pub const STORE_SOCKET: &str = "YUXI_STORE_SOCKET";
    /// The model of agents whose context and run name none, `<provider>/<model>`.
    pub const DEFAULT_MODEL: &str = "YUXI_DEFAULT_MODEL";
    /// Where `scripted/file:` and `scripted/auto` scripts are read from.
    pub const SCRIPTS_DIR: &str = "YUXI_SCRIPTS_DIR";
    /// The MCP server file ([`super::McpServers`] as YAML).
    pub const MCP_SERVERS: &str = "YUXI_MCP_SERVERS";
    /// The facade's base URL, as the runner reaches it.
    pub const FACADE_URL: &str = "YUXI_FACADE_URL";
    /// The run's bearer token for the facade (a `yxr_` token).
    pub const RUN_TOKEN: &str = "YUXI_RUN_TOKEN";
    /// The read-only skills library the agent's skills are projected from.
    pub const SKILLS_LIBRARY: &str = "YUXI_SKILLS_LIBRARY";
    /// Paths `execute` commands must not see, separated as `PATH` is.
    pub const SANDBOX_HIDE: &str = "YUXI_SANDBOX_HIDE";
    /// How long the runner's lease on its run lasts without renewal, in seconds
    /// ([`super::DEFAULT_LEASE_SECONDS`] when unset); it renews it every third of that.
    pub const RUN_LEASE_SECONDS: &str = "YUXI_RUN_LEASE_SECONDS";
    /// The Model resource a run runs on, a manifest file (in a pod, [`super::MODEL_KEY`] of the
    /// inputs); the values it references come in the `YUXI_MODEL_*` variables of
    /// [`crate::resources::model::secrets`].
    pub const MODEL_FILE: &str = "YUXI_MODEL_FILE";
    /// The OpenAI-compatible endpoint of `openai/` models.
    pub const OPENAI_BASE_URL: &str = "OPENAI_BASE_URL";
    /// The key of that endpoint.
    pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
}

/// How long a runner's lease on its run lasts without renewal, in seconds: a runner that dies (killed,
/// out of memory, its node gone) is known to be gone at most this long after its last renewal.
pub const DEFAULT_LEASE_SECONDS: u64 = 30;

/// Where the inputs Secret is mounted in the runner container.
pub const INPUTS_DIR: &str = "/etc/yuxi/inputs";
/// The key (and file name) of the AgentRun manifest in the inputs.
pub const RUN_KEY: &str = "run.yaml";
/// The key (and file name) of the Agent manifest in the inputs.
pub const AGENT_KEY: &str = "agent.yaml";
/// The key (and file name) of the Model manifest in the inputs, for a run on a Model resource.
pub const MODEL_KEY: &str = "model.yaml";
/// The key (and file name) of the MCP server configuration in the inputs, when there is one.
pub const MCP_SERVERS_KEY: &str = "mcp-servers.yaml";
/// The folder the runner and sandbox containers share for the sandbox socket.
pub const SOCKET_DIR: &str = "/run/yuxi";
/// The sandbox container's Unix socket, where the runner sends `execute` commands.
pub const SANDBOX_SOCKET: &str = "/run/yuxi/sandbox.sock";
/// Where the skills library is mounted, read-only, in the runner container.
pub const SKILLS_LIBRARY_DIR: &str = "/var/lib/yuxi/skills-library";

/// The system prompt of an agent whose context sets none.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are a capable assistant. Work step by step, use the tools you have when they help, and finish with a clear, complete answer.";
/// The default of `maxExecutionSteps` (Yuxi: 300).
pub const DEFAULT_MAX_STEPS: u32 = 300;
/// The default of `modelRetryTimes` (Yuxi: 2).
pub const DEFAULT_MODEL_RETRIES: u32 = 2;
/// The default of `timeoutSeconds`, in seconds (Yuxi's job time-out: 3600).
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 3600;

/// One configured MCP server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServer {
    /// Its streamable HTTP endpoint.
    pub url: String,
    /// Expose only these of its tools; absent: all of them.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Headers sent with every request to it (bearer tokens, API keys), each from one source
    /// ([`super::mcp_headers`]).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: super::mcp_headers::Headers,
    /// How long connecting and listing its tools may take, in seconds (absent: 15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u32>,
    /// How long one tool call may take, in seconds (absent: 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_timeout_seconds: Option<u32>,
    /// The certificate authorities (PEM) its certificate is checked against, in place of the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<String>,
}

/// The configured MCP servers, by name.
pub type McpServers = BTreeMap<String, McpServer>;

impl McpServer {
    /// The server an McpServer resource declares, as the runner reads it: its endpoint, its tool
    /// allowlist, its headers by name.
    pub fn of_resource(server: &crate::resources::mcp_server::McpServer) -> McpServer {
        let spec = &server.spec;
        let headers = spec
            .headers
            .iter()
            .map(|h| {
                let source = super::mcp_headers::HeaderSource {
                    value: h.value.clone(),
                    env: h.env.clone(),
                    file: None,
                    secret_key_ref: h
                        .secret_key_ref
                        .as_ref()
                        .map(|s| super::mcp_headers::SecretKey { name: s.name.clone(), key: s.key.clone() }),
                    caller: h.caller.as_ref().map(|c| super::mcp_headers::CallerToken { audience: c.audience.clone() }),
                    prefix: h.prefix.clone(),
                };
                (h.name.clone(), source)
            })
            .collect();
        McpServer {
            url: server.endpoint(),
            tools: spec.tools.clone(),
            headers,
            timeout_seconds: spec.timeout_seconds,
            call_timeout_seconds: spec.call_timeout_seconds,
            ca_bundle: None,
        }
    }

    /// How long connecting and listing may take.
    pub fn timeout(&self) -> std::time::Duration {
        let seconds = self.timeout_seconds.unwrap_or(crate::resources::mcp_server::DEFAULT_TIMEOUT_SECONDS);
        std::time::Duration::from_secs(seconds.clamp(1, 300).into())
    }

    /// How long one tool call may take.
    pub fn call_timeout(&self) -> std::time::Duration {
        let seconds = self.call_timeout_seconds.unwrap_or(crate::resources::mcp_server::DEFAULT_CALL_TIMEOUT_SECONDS);
        std::time::Duration::from_secs(seconds.clamp(1, 3600).into())
    }
}

/// A Secret key the runner container gets as the variable `env`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretVariable {
    /// The variable.
    pub env: String,
    /// The Secret's key.
    pub secret: super::mcp_headers::SecretKey,
}

/// The prefix of the variables [`for_pod`] makes.
pub const HEADER_VARIABLE_PREFIX: &str = "YUXI_MCP_HEADER_";

/// For a sandbox pod: each `secretKeyRef` header of `servers` becomes the runner container's variable
/// `YUXI_MCP_HEADER_<n>` (numbered in order of server and header name), read back with `env`. Returns the
/// servers as the runner reads them, and the variables to set from Secrets.
pub fn for_pod(servers: &BTreeMap<String, McpServer>) -> (BTreeMap<String, McpServer>, Vec<SecretVariable>) {
    let mut variables = Vec::new();
    let mut rewritten = servers.clone();
    for server in rewritten.values_mut() {
        for source in server.headers.values_mut() {
            if let Some(secret) = source.secret_key_ref.take() {
                let env = format!("{HEADER_VARIABLE_PREFIX}{}", variables.len());
                source.env = Some(env.clone());
                variables.push(SecretVariable { env, secret });
            }
        }
    }
    (rewritten, variables)
}

#[cfg(test)]
mod tests {
    use super::super::mcp_headers::SecretKey;
    use super::*;

    #[test]
    fn secrets_become_runner_variables_for_a_pod() {
        let server: McpServer = serde_norway::from_str(
            "url: http://docs:8080/mcp\nheaders:\n  Authorization: {secretKeyRef: {name: docs-token, key: token}, prefix: 'Bearer '}\n  X-Team: {value: research}\n",
        )
        .expect("a server");
        let (servers, variables) = for_pod(&BTreeMap::from([("docs".to_string(), server)]));
        let auth = &servers["docs"].headers["Authorization"];
        assert_eq!((auth.env.as_deref(), auth.secret_key_ref.as_ref()), (Some("YUXI_MCP_HEADER_0"), None));
        assert_eq!(
            variables,
            vec![SecretVariable {
                env: "YUXI_MCP_HEADER_0".into(),
                secret: SecretKey { name: "docs-token".into(), key: "token".into() }
            }]
        );
        assert_eq!(servers["docs"].headers["X-Team"].value.as_deref(), Some("research"));
    }
}
