//! The `McpServer` custom resource (`mcpservers.yuxi.dev/v1alpha1`): an MCP server the agents of a
//! namespace may use, declared once. Its spec names where it is and how to authenticate to it; its
//! status is what the controller found there: its tools (names, descriptions, input schemas and hints
//! such as `destructiveHint`), its protocol version, and whether it answered
//! (docs/concepts/mcp.md#mcp-servers-as-resources).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use super::agent::AgentShare;
use super::model::ConfigMapKeyRef;
use super::remote::RemoteHeader;

/// The condition saying the spec follows the rules and its Secrets exist.
pub const ACCEPTED: &str = "Accepted";
/// The condition saying the server answered the last discovery.
pub const READY: &str = "Ready";
/// How often a server's tools are listed again when the spec names no interval, in seconds.
pub const DEFAULT_REFRESH_SECONDS: u32 = 300;
/// The bounds of `spec.refreshSeconds`.
pub const REFRESH_SECONDS: std::ops::RangeInclusive<u32> = 5..=86_400;
/// The most tools a status lists.
pub const MAX_LISTED_TOOLS: usize = 256;
/// How long connecting to a server and listing its tools may take when the spec names no time, in
/// seconds.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 15;
/// How long one tool call may take when the spec names no time, in seconds.
pub const DEFAULT_CALL_TIMEOUT_SECONDS: u32 = 300;

/// The desired state of an McpServer.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "yuxi.dev",
    version = "v1alpha1",
    kind = "McpServer",
    plural = "mcpservers",
    singular = "mcpserver",
    shortname = "mcps",
    category = "yuxi",
    namespaced,
    status = "McpServerStatus",
    doc = "An MCP server the agents of the namespace may use by name: where it is, how to authenticate to it, who may use it; its status lists the tools the controller discovered there.",
    printcolumn(name = "URL", type_ = "string", json_path = ".status.url", description = "The server's endpoint"),
    printcolumn(
        name = "Tools",
        type_ = "integer",
        json_path = ".status.toolCount",
        description = "How many tools the last discovery found"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the server answered the last discovery"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("!has(self.url) || self.url.startsWith('https://') || self.url.startsWith('http://')")
        .message("must be an http:// or https:// URL of the server's MCP endpoint")
        .field_path(".url"),
    validation = Rule::new("has(self.url) != has(self.deploy)")
        .message("give exactly one of url (a server that runs elsewhere) and deploy (one the operator runs)")
        .field_path(".url"),
)]
pub struct McpServerSpec {
    /// The server's MCP endpoint (`http://docs-mcp.tools.svc:8080/mcp`), streamable HTTP; absent when
    /// the operator runs it (`deploy`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(min = 1, max = 2048))]
    pub url: String,

    /// A server the operator runs in the namespace: a Deployment and a Service named after the
    /// McpServer, under the restricted Pod Security Standard, reached at
    /// `http://<name>.<namespace>.svc:<port><path>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy: Option<McpServerDeploy>,

    /// Headers sent with every request to it, each from exactly one of `value`, `secretKeyRef` (given
    /// to a run's runner container only), `env` (a variable of the runner) or `caller` (a token of the
    /// run's own user for an audience).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub headers: Vec<RemoteHeader>,

    /// Offer only these of its tools to agents; absent: all it lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub tools: Option<Vec<String>>,

    /// How often its tools are listed again, in seconds, 5..86400 (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 5, max = 86400))]
    pub refresh_seconds: Option<u32>,

    /// How long connecting to it and listing its tools may take, in seconds, 1..300 (default 15): for
    /// the discovery and for each run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 300))]
    pub timeout_seconds: Option<u32>,

    /// How long one call of its tools may take in a run, in seconds, 1..3600 (default 300); past it the
    /// model reads that the tool did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub call_timeout_seconds: Option<u32>,

    /// The certificate authorities (PEM) its `https://` certificate is checked against, in place of the
    /// system's: a key of a ConfigMap of the namespace (CA certificates are public; trust-manager and
    /// `kube-root-ca.crt` publish bundles there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle_ref: Option<ConfigMapKeyRef>,

    /// Who may use it in their agents (as an Agent's `share`); absent: every user of the namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<AgentShare>,

    /// Other namespaces whose agents may use it too, naming it `<namespace>/<name>` in `context.mcps`
    /// (`*`: every namespace the operator serves); `share` still decides which users. Its headers may
    /// then name no Secret: a Secret is never lent to another namespace's runs (send each user's own
    /// token with `caller` instead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(min = 1, max = 63)))]
    pub allowed_namespaces: Option<Vec<String>>,
}

impl McpServerSpec {
    /// How often its tools are listed again.
    pub fn refresh_seconds(&self) -> u32 {
        self.refresh_seconds.unwrap_or(DEFAULT_REFRESH_SECONDS).clamp(*REFRESH_SECONDS.start(), *REFRESH_SECONDS.end())
    }

    /// The server's endpoint: `url`, or the Service of the server the operator runs for the McpServer
    /// `name` of `namespace`.
    pub fn endpoint(&self, name: &str, namespace: &str) -> String {
        match (&self.deploy, self.url.is_empty()) {
            (Some(deploy), true) => format!(
                "http://{name}.{namespace}.svc:{}{}",
                deploy.port.unwrap_or(DEFAULT_DEPLOY_PORT),
                deploy.path.as_deref().unwrap_or(DEFAULT_DEPLOY_PATH)
            ),
            _ => self.url.clone(),
        }
    }

    /// Whether agents of `namespace`, another namespace than the server's, may use it.
    pub fn allows_namespace(&self, namespace: &str) -> bool {
        self.allowed_namespaces.iter().flatten().any(|allowed| allowed == "*" || allowed == namespace)
    }

    /// How long connecting and listing may take.
    pub fn timeout(&self) -> std::time::Duration {
        std::time::Duration::from_secs(self.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS).clamp(1, 300).into())
    }
}

/// The port a server the operator runs listens on when `deploy.port` is absent.
pub const DEFAULT_DEPLOY_PORT: u16 = 8080;
/// The path of its MCP endpoint when `deploy.path` is absent.
pub const DEFAULT_DEPLOY_PATH: &str = "/mcp";

/// A server the operator runs: its container, and how it is reached.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct McpServerDeploy {
    /// The container image (`registry.example.com/tools/docs-mcp:1.4.0`).
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// The command, in place of the image's entrypoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32), inner(length(max = 4096)))]
    pub command: Option<Vec<String>>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64), inner(length(max = 4096)))]
    pub args: Option<Vec<String>>,
    /// Its variables, each a `value` or a `secretKeyRef` of the namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub env: Vec<DeployVariable>,
    /// The port it serves MCP on (default 8080).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<u16>,
    /// The path of its MCP endpoint (default `/mcp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub path: Option<String>,
    /// How many copies run, 1..10 (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10))]
    pub replicas: Option<i32>,
    /// CPU and memory requests and limits of its container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<DeployResources>,
}

/// CPU and memory a server the operator runs asks for and may use.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeployResources {
    /// What it is guaranteed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<ResourceAmounts>,
    /// What it may use at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ResourceAmounts>,
}

/// An amount of CPU and of memory, as Kubernetes quantities (`500m`, `256Mi`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceAmounts {
    /// CPU (`500m`, `2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub cpu: Option<String>,
    /// Memory (`256Mi`, `1Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32))]
    pub memory: Option<String>,
}

impl ResourceAmounts {
    /// The amounts given, by resource name (`cpu`, `memory`).
    pub fn named(&self) -> Vec<(&'static str, &str)> {
        [("cpu", self.cpu.as_deref()), ("memory", self.memory.as_deref())]
            .into_iter()
            .filter_map(|(name, amount)| Some((name, amount?)))
            .collect()
    }
}

/// Whether `amount` is a Kubernetes quantity of the forms a CPU or memory amount takes: a decimal
/// number, with `m` or a decimal (`k`, `M`, `G`, `T`) or binary (`Ki`, `Mi`, `Gi`, `Ti`) suffix.
pub fn is_quantity(amount: &str) -> bool {
    let number_end = amount.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(amount.len());
    let (number, suffix) = amount.split_at(number_end);
    !number.is_empty()
        && number.parse::<f64>().is_ok()
        && ["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"].contains(&suffix)
}

/// One variable of a server the operator runs.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DeployVariable {
    /// Its name.
    #[schemars(length(min = 1, max = 128))]
    pub name: String,
    /// Its value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16384))]
    pub value: Option<String>,
    /// A key of a Secret of the namespace whose value it takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<super::knowledge_base::SecretKeyRef>,
}

/// One tool a server offers, as discovery found it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct DiscoveredTool {
    /// Its name.
    pub name: String,
    /// What it does, as the server says (cut to 1024 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its input schema, as JSON text (cut to 16 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<String>,
    /// The server's hint that it only reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    /// The server's hint that it may destroy or change things: a person approves its calls unless the
    /// agent trusts every tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
}

/// What the controller found at the server.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct McpServerStatus {
    /// The generation the status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The endpoint discovery and runs reach: `spec.url`, or the Service of the server the operator
    /// runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `Accepted` and `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Its tools, as the last discovery listed them (at most 256).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<DiscoveredTool>,
    /// How many tools it lists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_count: Option<i32>,
    /// The protocol version it spoke.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The name it gave itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_name: Option<String>,
    /// When it was last listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_check_time: Option<Time>,
    /// Why the last discovery failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

impl McpServer {
    /// Its endpoint: `spec.url`, or the Service of the server the operator runs for it.
    pub fn endpoint(&self) -> String {
        self.spec.endpoint(
            self.metadata.name.as_deref().unwrap_or_default(),
            self.metadata.namespace.as_deref().unwrap_or_default(),
        )
    }
}

/// A server as `context.mcps` names it: `<name>` of the agent's own namespace, or
/// `<namespace>/<name>` of another namespace. Returns the namespace (absent: the agent's) and the name.
pub fn parse_reference(reference: &str) -> (Option<&str>, &str) {
    match reference.split_once('/') {
        Some((namespace, name)) => (Some(namespace), name),
        None => (None, reference),
    }
}
