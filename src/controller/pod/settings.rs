//! The sandbox settings ([`SandboxSettings`], from the controller's settings file or `sandbox-pod
//! --settings`), their defaults, and the rules a usable set of settings keeps ([`check_settings`]): what
//! the API server would accept but the sandbox must not run with.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};

use super::error::PodError;
use crate::resources::validation::is_dns1123_subdomain;
use crate::run::inputs::McpServers;

/// A key of a Secret in the run's namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKey {
    /// The Secret's name.
    pub name: String,
    /// The key within it.
    pub key: String,
}

/// Settings of sandbox pods, from the controller's settings file (or `sandbox-pod --settings`).
/// Fields are camelCase; every field is optional in the file (a missing one takes its default), an
/// unknown one is an error (a misspelt hardening setting must not be ignored silently).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct SandboxSettings {
    /// The image of the runner container: it must hold `yuxi-operator` on its `PATH`, and needs no shell
    /// (the control-plane image, which has none). Default: `yuxi-operator:<this crate's version>`.
    pub image: String,
    /// The image of the sandbox container, which runs the model's `execute` commands with `/bin/sh -c`:
    /// it must hold `yuxi-operator` on its `PATH`, a shell and the tools the commands use (the sandbox
    /// image, or a toolbox built from it with compilers and interpreters). Default:
    /// `yuxi-operator-sandbox:<this crate's version>`.
    pub sandbox_image: String,
    /// `Always`, `IfNotPresent` or `Never`. Default: unset (Kubernetes decides from the tag).
    pub image_pull_policy: Option<String>,
    /// Names of Secrets in the run's namespace to pull the images with.
    pub image_pull_secrets: Vec<String>,
    /// A RuntimeClass for stronger isolation (`gvisor`, `kata`). Default: unset (the node's runtime).
    pub runtime_class_name: Option<String>,
    /// A PriorityClass for sandbox pods. Default: unset.
    pub priority_class_name: Option<String>,
    /// Node labels a sandbox pod must be scheduled on.
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of sandbox pods.
    pub tolerations: Vec<Toleration>,
    /// Extra labels on sandbox pods; the builder's own labels win over them.
    pub pod_labels: BTreeMap<String, String>,
    /// Extra annotations on sandbox pods; the builder's own annotations win over them.
    pub pod_annotations: BTreeMap<String, String>,
    /// The uid both containers run as; not 0. Default: 65532.
    pub run_as_user: i64,
    /// The gid both containers run as; not 0. Default: 65532.
    pub run_as_group: i64,
    /// The group that owns the volumes (the claims must be writable by it); not 0. Default: 65532.
    pub fs_group: i64,
    /// `false` runs the pod in its own user namespace (needs Kubernetes 1.33 or later and a runtime that
    /// supports it). Default: unset (the host's).
    pub host_users: Option<bool>,
    /// Resource requests and limits of the runner container. Default: requests 100m CPU and 256Mi
    /// memory, limits 1 CPU and 1Gi memory.
    pub runner_resources: ResourceRequirements,
    /// Resource requests and limits of the sandbox container. Default: requests 250m CPU and 512Mi
    /// memory, limits 2 CPUs and 2Gi memory.
    pub sandbox_resources: ResourceRequirements,
    /// The size limit of each container's `/tmp` emptyDir. Default: 1Gi.
    pub tmp_size_limit: Quantity,
    /// Seconds added to the run's `timeoutSeconds` for the pod's `activeDeadlineSeconds`: time to pull the
    /// image, start, and end the run cleanly after its own time-out; not negative. Default: 300.
    pub deadline_grace_seconds: i64,
    /// The PersistentVolumeClaim holding `users/<uid>/workspace` and `users/<uid>/threads/<file_thread_id>/{uploads,
    /// outputs}`. Runs of many users share it: it must be ReadWriteMany unless every pod lands on one
    /// node. Default: `yuxi-data`.
    pub user_data_claim: String,
    /// The PersistentVolumeClaim holding `users/<uid>/skills/<thread_id>`; may be the same claim as
    /// `userDataClaim` (then one volume serves both). Default: `yuxi-data`.
    pub skills_claim: String,
    /// The PersistentVolumeClaim of the skills library (folders with a `SKILL.md`), mounted read-only in
    /// the runner container, which projects the agent's skills from it; `null`: runs get no skills.
    /// Default: `yuxi-skills-library`.
    pub skills_library_claim: Option<String>,
    /// The uid of runs that set no `spec.uid`; unset: such runs are refused (their workspace would be
    /// nobody's). Default: unset.
    pub default_uid: Option<String>,
    /// The Secret key holding the Redis URL (`YUXI_REDIS_URL`). Default: `yuxi-redis`, key `url`.
    pub redis_url_secret: SecretKey,
    /// Let the runner use a Redis that answers without a password (`YUXI_ALLOW_UNAUTHENTICATED_STORE`);
    /// it refuses one otherwise. Default: false.
    #[serde(default)]
    pub allow_unauthenticated_store: bool,
    /// The Secret key holding the model API key (`OPENAI_API_KEY`), referenced as optional; `null`: no
    /// key. Default: `yuxi-model`, key `api-key`.
    pub openai_api_key_secret: Option<SecretKey>,
    /// The OpenAI-compatible endpoint (`OPENAI_BASE_URL`). Default: unset (with a key: OpenAI's own).
    pub openai_base_url: Option<String>,
    /// The model of agents that name none (`YUXI_DEFAULT_MODEL`). Default: unset.
    pub default_model: Option<String>,
    /// The facade's URL inside the cluster (`YUXI_FACADE_URL`), through which a main agent's run
    /// delegates to subagents; unset: runs get no subagent tools. Default: unset.
    pub facade_url: Option<String>,
    /// The MCP servers agents may use, as the runner's `--mcp-servers` file has them (`name: {url,
    /// tools, headers}`); written into the inputs Secret and named by `YUXI_MCP_SERVERS` when not empty,
    /// with each `secretKeyRef` header read from a variable of the runner container.
    pub mcp_servers: BTreeMap<String, serde_json::Value>,
    /// Where the runners export the spans of their runs (docs/how-to/traces.md); unset: nowhere.
    /// Default: unset.
    pub traces: Option<TraceExport>,
}

/// The OTLP collector runners export spans to: the runner container's `OTEL_*` variables.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct TraceExport {
    /// The collector's base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`), such as `http://otel-collector.observability.svc:4318`.
    pub endpoint: String,
    /// A Secret key holding the collector's headers (`OTEL_EXPORTER_OTLP_HEADERS`, `k=v,...`: a
    /// backend's key), given to the runner container only.
    pub headers_secret: Option<SecretKey>,
    /// The share of the traces a run starts that are kept (`OTEL_TRACES_SAMPLER_ARG`), 0 to 1.
    pub sampler_ratio: Option<f64>,
    /// `grpc` or `http/protobuf` (the default) (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub protocol: Option<String>,
    /// Whether message contents and tool arguments and results are exported
    /// (`YUXI_TRACES_CAPTURE_CONTENT`; bounded, keys and tokens removed). Default: false.
    pub capture_content: bool,
}

impl SandboxSettings {
    /// The MCP servers as a runner of a pod reads them, and the variables its runner container gets
    /// from Secrets: each `secretKeyRef` header becomes a variable of the runner only
    /// ([`crate::run::inputs::for_pod`]). Servers that are not valid are none (the settings'
    /// validation refuses them first).
    pub fn mcp_for_pod(&self) -> (McpServers, Vec<crate::run::inputs::SecretVariable>) {
        let servers = serde_json::Value::Object(self.mcp_servers.clone().into_iter().collect());
        let servers: McpServers = serde_json::from_value(servers).unwrap_or_default();
        crate::run::inputs::for_pod(&servers)
    }
}

impl Default for SandboxSettings {
    fn default() -> Self {
        let resources = |request_cpu: &str, request_memory: &str, limit_cpu: &str, limit_memory: &str| {
            let quantities = |cpu: &str, memory: &str| {
                BTreeMap::from([
                    ("cpu".to_string(), Quantity(cpu.to_string())),
                    ("memory".to_string(), Quantity(memory.to_string())),
                ])
            };
            ResourceRequirements {
                requests: Some(quantities(request_cpu, request_memory)),
                limits: Some(quantities(limit_cpu, limit_memory)),
                ..ResourceRequirements::default()
            }
        };
        Self {
            image: format!("yuxi-operator:{}", env!("CARGO_PKG_VERSION")),
            sandbox_image: format!("yuxi-operator-sandbox:{}", env!("CARGO_PKG_VERSION")),
            image_pull_policy: None,
            image_pull_secrets: Vec::new(),
            runtime_class_name: None,
            priority_class_name: None,
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            pod_labels: BTreeMap::new(),
            pod_annotations: BTreeMap::new(),
            run_as_user: 65532,
            run_as_group: 65532,
            fs_group: 65532,
            host_users: None,
            runner_resources: resources("100m", "256Mi", "1", "1Gi"),
            sandbox_resources: resources("250m", "512Mi", "2", "2Gi"),
            tmp_size_limit: Quantity("1Gi".to_string()),
            deadline_grace_seconds: 300,
            user_data_claim: "yuxi-data".to_string(),
            skills_claim: "yuxi-data".to_string(),
            skills_library_claim: Some("yuxi-skills-library".to_string()),
            default_uid: None,
            redis_url_secret: SecretKey { name: "yuxi-redis".to_string(), key: "url".to_string() },
            allow_unauthenticated_store: false,
            openai_api_key_secret: Some(SecretKey { name: "yuxi-model".to_string(), key: "api-key".to_string() }),
            openai_base_url: None,
            default_model: None,
            facade_url: None,
            mcp_servers: BTreeMap::new(),
            traces: None,
        }
    }
}

/// Settings text that cannot be read as [`SandboxSettings`]: the field at fault (its path in the file, or
/// `settings` for the document as a whole) and the problem. Shown as `<field>: <problem>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SettingsError {
    /// The field's path, such as `redisUrlSecret.extra`; `settings` when the text is not YAML or not a map.
    pub field: String,
    /// What is wrong, with the parser's line and column where it gives them.
    pub message: String,
}

impl SandboxSettings {
    /// Reads settings from YAML text (an empty document gives the defaults).
    ///
    /// Errors: [`SettingsError`] naming the field for a value of the wrong shape or an unknown field, or
    /// `settings` with the parser's message (line and column) for text that is not YAML.
    pub fn from_yaml(text: &str) -> Result<Self, SettingsError> {
        let value: serde_norway::Value = serde_norway::from_str(text)
            .map_err(|e| SettingsError { field: "settings".into(), message: format!("not valid YAML: {e}") })?;
        if value.is_null() {
            return Ok(Self::default());
        }
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." || path.is_empty() { "settings".to_string() } else { path };
            SettingsError { field, message: e.inner().to_string() }
        })
    }
}

/// A [`PodError::Settings`] naming the setting `field` (camelCase, as in the file).
pub(super) fn settings_error(field: &str, message: impl Into<String>) -> PodError {
    PodError::Settings { field: field.to_string(), message: message.into() }
}

/// The settings' own rules: what the API server would accept but the sandbox must not run with.
///
/// Errors: [`PodError::Settings`] naming the first unusable setting: a root (not positive) `runAsUser`,
/// `runAsGroup` or `fsGroup`; an empty `image` or `sandboxImage`; an `imagePullPolicy` other than
/// `Always`, `IfNotPresent` or `Never`; a negative `deadlineGraceSeconds`; a claim or Secret name that is
/// not a DNS-1123 subdomain, or an empty Secret key; `mcpServers` that are not MCP servers (`{url, tools}`).
pub(super) fn check_settings(settings: &SandboxSettings) -> Result<(), PodError> {
    for (field, id) in
        [("runAsUser", settings.run_as_user), ("runAsGroup", settings.run_as_group), ("fsGroup", settings.fs_group)]
    {
        if id <= 0 {
            return Err(settings_error(field, format!("must be a positive id, not root (is {id})")));
        }
    }
    for (field, image) in [("image", &settings.image), ("sandboxImage", &settings.sandbox_image)] {
        if image.trim().is_empty() {
            return Err(settings_error(field, "is required"));
        }
    }
    if let Some(policy) = &settings.image_pull_policy
        && !matches!(policy.as_str(), "Always" | "IfNotPresent" | "Never")
    {
        return Err(settings_error("imagePullPolicy", format!("{policy:?} is not Always, IfNotPresent or Never")));
    }
    if settings.deadline_grace_seconds < 0 {
        return Err(settings_error(
            "deadlineGraceSeconds",
            format!("must not be negative (is {})", settings.deadline_grace_seconds),
        ));
    }
    for (field, claim) in [
        ("userDataClaim", Some(&settings.user_data_claim)),
        ("skillsClaim", Some(&settings.skills_claim)),
        ("skillsLibraryClaim", settings.skills_library_claim.as_ref()),
    ] {
        if let Some(claim) = claim
            && !is_dns1123_subdomain(claim)
        {
            return Err(settings_error(field, format!("{claim:?} is not a PersistentVolumeClaim name")));
        }
    }
    let mut secrets = vec![("redisUrlSecret", &settings.redis_url_secret)];
    secrets.extend(settings.openai_api_key_secret.as_ref().map(|s| ("openaiApiKeySecret", s)));
    secrets
        .extend(settings.traces.as_ref().and_then(|t| t.headers_secret.as_ref()).map(|s| ("traces.headersSecret", s)));
    if let Some(traces) = &settings.traces {
        if !traces.endpoint.is_empty()
            && !traces.endpoint.starts_with("http://")
            && !traces.endpoint.starts_with("https://")
        {
            return Err(settings_error(
                "traces.endpoint",
                format!("{:?} is not an http:// or https:// URL", traces.endpoint),
            ));
        }
        if let Some(protocol) = traces.protocol.as_deref().filter(|p| !matches!(*p, "grpc" | "http/protobuf")) {
            return Err(settings_error("traces.protocol", format!("{protocol:?} is neither grpc nor http/protobuf")));
        }
        if let Some(ratio) = traces.sampler_ratio
            && !(0.0..=1.0).contains(&ratio)
        {
            return Err(settings_error("traces.samplerRatio", format!("must be within 0..1 (is {ratio})")));
        }
    }
    for (field, secret) in secrets {
        if !is_dns1123_subdomain(&secret.name) {
            return Err(settings_error(&format!("{field}.name"), format!("{:?} is not a Secret name", secret.name)));
        }
        if secret.key.is_empty() {
            return Err(settings_error(&format!("{field}.key"), "is required"));
        }
    }
    if !settings.mcp_servers.is_empty() {
        let servers = serde_json::Value::Object(settings.mcp_servers.clone().into_iter().collect());
        let servers = serde_json::from_value::<McpServers>(servers).map_err(|e| {
            settings_error("mcpServers", format!("is not a map of MCP servers ({{url, tools, headers}}): {e}"))
        })?;
        for (name, server) in &servers {
            crate::run::mcp_headers::check(&server.headers)
                .map_err(|e| settings_error(&format!("mcpServers.{name}.headers"), e.to_string()))?;
            for secret in server.headers.values().filter_map(|h| h.secret_key_ref.as_ref()) {
                if !is_dns1123_subdomain(&secret.name) || secret.key.is_empty() {
                    return Err(settings_error(
                        &format!("mcpServers.{name}.headers"),
                        format!("{:?}/{:?} is not a Secret name and key", secret.name, secret.key),
                    ));
                }
            }
        }
    }
    Ok(())
}
