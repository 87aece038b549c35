//! The sandbox pod builder: a pure function from an AgentRun, the Agent it names and the sandbox settings
//! to the two objects the run needs, its Pod and the ConfigMap of its inputs (DESIGN.md sections 3 and 5).
//! The controller creates what [`sandbox_objects`] returns; `yuxi-operator sandbox-pod` prints it.
//!
//! # The pod
//!
//! One pod per run, named by [`pod_name`], in the run's namespace, owned by the run (a controller owner
//! reference, so deleting the run deletes the pod and its inputs):
//!
//! - container `runner` (`yuxi-operator runner --run /etc/yuxi/inputs/run.yaml --agent
//!   /etc/yuxi/inputs/agent.yaml --sandbox-socket /run/yuxi/sandbox.sock`, the volumes at the runner's
//!   default paths): the only holder of the model API key and the run's credentials, from Secret key
//!   references, never from the operator's own;
//! - container `sandbox` (`yuxi-operator sandbox-exec --socket /run/yuxi/sandbox.sock --workdir
//!   /home/gem/user-data/workspace`): runs the `execute` tool's commands; no environment at all. It is a
//!   native sidecar (an init container with `restartPolicy: Always`, Kubernetes 1.29 and later): it starts
//!   before the runner and is stopped when the runner ends, so the pod ends with the run (a second ordinary
//!   container would keep the pod running until its deadline). Its status is among the pod's
//!   `initContainerStatuses`; the run's outcome is the `runner` container's.
//!
//! The two share the run's volumes and a Unix socket on an emptyDir at `/run/yuxi`; each has its own
//! emptyDir at `/tmp`, as the root filesystem is read-only.
//!
//! | path | volume (subPath) | runner | sandbox |
//! | --- | --- | --- | --- |
//! | `/home/gem/user-data/workspace` | user-data claim, `users/<uid>/workspace` | rw | rw |
//! | `/home/gem/user-data/uploads` | user-data claim, `threads/<file_thread_id>/uploads` | rw | rw |
//! | `/home/gem/user-data/outputs` | user-data claim, `threads/<file_thread_id>/outputs` | rw | rw |
//! | `/home/gem/skills` | skills claim, `skills/<thread_id>` | rw (skills projected at start) | ro |
//! | `/var/lib/yuxi/skills-library` | skills library claim (when configured) | ro | — |
//! | `/etc/yuxi/inputs` | the inputs ConfigMap (`run.yaml`, `agent.yaml`, `mcp-servers.yaml`) | ro | — |
//! | `/run/yuxi` | emptyDir (the sandbox socket) | rw | rw |
//! | `/tmp` | an emptyDir of its own | rw | rw |
//!
//! The ids the sub-paths are made of come from the run, as the local mode derives them: `uid` is
//! `spec.uid` (or the settings' `defaultUid`; a run with neither is refused), `thread_id` is `spec.threadId`
//! (or the run's name), `file_thread_id` is `spec.parent.fileThreadId`, else `spec.parent.threadId`, else
//! the run's own thread. Each must be an id of [`is_valid_id`](crate::run::thread_id::is_valid_id) (no `/`, no leading `.`), so no sub-path can
//! climb out of its scope; otherwise the error names the field it came from.
//!
//! Hardening (restricted Pod Security Standard): non-root with a fixed uid, gid and fsGroup (65532 by
//! default), seccomp `RuntimeDefault`, no privilege escalation, every capability dropped, read-only root
//! filesystems, no service-account token, no service links, no shared process namespace,
//! `restartPolicy: Never`, `activeDeadlineSeconds` = the run's `timeoutSeconds` (default
//! [`DEFAULT_TIMEOUT_SECONDS`]) plus the settings' grace margin, resources from the settings, and
//! optionally a `runtimeClassName` (gVisor, Kata).

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::{
    Capabilities, ConfigMap, ConfigMapVolumeSource, Container, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    LocalObjectReference, PersistentVolumeClaimVolumeSource, Pod, PodOS, PodSecurityContext, PodSpec,
    ResourceRequirements, SeccompProfile, SecretKeySelector, SecurityContext, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};
use serde::{Deserialize, Serialize};

use crate::resources::names::{
    AGENT_LABEL, APP_NAME, CREDENTIALS_TOKEN_KEY, MANAGED_BY, RUN_LABEL, THREAD_ANNOTATION, THREAD_LABEL,
    credentials_secret_name, inputs_name, label_value, pod_name,
};
use crate::resources::{Agent, AgentRun};
use crate::run::inputs::{
    AGENT_KEY, DEFAULT_TIMEOUT_SECONDS, INPUTS_DIR, MCP_SERVERS_KEY, RUN_KEY, SANDBOX_SOCKET, SKILLS_LIBRARY_DIR,
    SOCKET_DIR, env as env_names,
};
use crate::run::scope::{ID_RULE, NotAPathSegment, Scope, ScopeIds, segment};

/// The name of the container that runs the graph (`yuxi-operator runner`).
pub const RUNNER_CONTAINER: &str = "runner";
/// The name of the sidecar container that runs `execute` commands (`yuxi-operator sandbox-exec`).
pub const SANDBOX_CONTAINER: &str = "sandbox";
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
    /// The image of both containers (it must hold `yuxi-operator` on its `PATH`). Default:
    /// `yuxi-operator:<this crate's version>`.
    pub image: String,
    /// Another image for the sandbox container only (a toolbox with compilers and interpreters for the
    /// model's commands; it must hold `yuxi-operator` too). Default: `image`.
    pub sandbox_image: Option<String>,
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
    /// The PersistentVolumeClaim holding `users/<uid>/workspace` and `threads/<file_thread_id>/{uploads,
    /// outputs}`. Runs of many users share it: it must be ReadWriteMany unless every pod lands on one
    /// node. Default: `yuxi-data`.
    pub user_data_claim: String,
    /// The PersistentVolumeClaim holding `skills/<thread_id>`; may be the same claim as
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
    /// tools}`); written into the inputs ConfigMap and named by `YUXI_MCP_SERVERS` when not empty.
    pub mcp_servers: BTreeMap<String, serde_json::Value>,
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
            sandbox_image: None,
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
            openai_api_key_secret: Some(SecretKey { name: "yuxi-model".to_string(), key: "api-key".to_string() }),
            openai_base_url: None,
            default_model: None,
            facade_url: None,
            mcp_servers: BTreeMap::new(),
        }
    }
}

impl SandboxSettings {
    /// Reads settings from YAML text (an empty document gives the defaults).
    ///
    /// Errors: `<field path>: <problem>` for a value of the wrong shape or an unknown field, or the
    /// parser's message (with line and column) for text that is not YAML.
    pub fn from_yaml(text: &str) -> Result<Self, String> {
        let value: serde_norway::Value = serde_norway::from_str(text).map_err(|e| format!("not valid YAML: {e}"))?;
        if value.is_null() {
            return Ok(Self::default());
        }
        serde_path_to_error::deserialize(value).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." || path.is_empty() { "settings".to_string() } else { path };
            format!("{field}: {}", e.inner())
        })
    }
}

/// What a run needs created: its pod, and the ConfigMap of its inputs (`run.yaml`, the AgentRun manifest,
/// and `agent.yaml`, the Agent manifest, as YAML the runner reads with `--run` and `--agent`; plus
/// `mcp-servers.yaml` when MCP servers are configured). Both carry the same labels and owner reference.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxObjects {
    /// The sandbox pod.
    pub pod: Pod,
    /// The inputs, named by [`inputs_name`]; immutable.
    pub inputs: ConfigMap,
}

/// Why no sandbox pod can be built for a run. Each error names the field at fault ([`PodError::field`]):
/// a field of the run (`metadata.name`, `spec.uid`, `spec.threadId`, `spec.parent.threadId`,
/// `spec.parent.fileThreadId`, `spec.agent`) or of the settings.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PodError {
    /// The run has no name (the pod, its inputs and its thread are named after it).
    #[error("metadata.name: is required: the sandbox pod and its inputs are named after the run")]
    MissingName,
    /// The run names no user and the settings give no default one.
    #[error(
        "spec.uid: is required for a sandbox pod, which mounts the user's workspace (users/<uid>/workspace); set it on the run, or set defaultUid in the sandbox settings"
    )]
    MissingUid,
    /// An id that would become a volume sub-path segment is not a safe id ([`is_valid_id`](crate::run::thread_id::is_valid_id)).
    #[error("{field}: {value:?} cannot be a path segment of the run's volumes: {ID_RULE}")]
    NotAPathSegment {
        /// The field the id came from, such as `spec.parent.fileThreadId`.
        field: String,
        /// The id.
        value: String,
    },
    /// The Agent given is not the one the run names.
    #[error("spec.agent: the run names the Agent {run_agent:?}, but the Agent given is {agent:?}")]
    AgentMismatch {
        /// The run's `spec.agent`.
        run_agent: String,
        /// The given Agent's `metadata.name`.
        agent: String,
    },
    /// A setting is unusable.
    #[error("sandbox settings {field}: {message}")]
    Settings {
        /// The setting, such as `runAsUser`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// An object could not be written as YAML.
    #[error("{field}: cannot be written as YAML: {message}")]
    Encode {
        /// What was being written, such as `run.yaml`.
        field: String,
        /// The encoder's message.
        message: String,
    },
}

impl PodError {
    /// The field at fault: a path in the run (`spec.uid`) or in the settings (`runAsUser`).
    pub fn field(&self) -> &str {
        match self {
            PodError::MissingName => "metadata.name",
            PodError::MissingUid => "spec.uid",
            PodError::AgentMismatch { .. } => "spec.agent",
            PodError::NotAPathSegment { field, .. }
            | PodError::Settings { field, .. }
            | PodError::Encode { field, .. } => field,
        }
    }
}

impl From<NotAPathSegment> for PodError {
    fn from(err: NotAPathSegment) -> Self {
        PodError::NotAPathSegment { field: err.field, value: err.value }
    }
}

/// The run's ids that make up its volumes' sub-paths ([`ScopeIds`]: the same rule as the local mode's).
fn scopes(run: &AgentRun, run_name: &str, settings: &SandboxSettings) -> Result<ScopeIds, PodError> {
    let uid = match (&run.spec.uid, &settings.default_uid) {
        (Some(uid), _) => uid.clone(),
        (None, Some(uid)) => segment("defaultUid", uid).map_err(|_| {
            settings_error("defaultUid", format!("{uid:?} cannot be a path segment of the workspace: {ID_RULE}"))
        })?,
        (None, None) => return Err(PodError::MissingUid),
    };
    let (thread_field, thread_id) = match &run.spec.thread_id {
        Some(thread_id) => ("spec.threadId", thread_id.as_str()),
        None => ("metadata.name", run_name),
    };
    Ok(ScopeIds::new(&uid, thread_field, thread_id, run.spec.parent.as_ref())?)
}

fn settings_error(field: &str, message: impl Into<String>) -> PodError {
    PodError::Settings { field: field.to_string(), message: message.into() }
}

/// The settings' own rules: what the API server would accept but the sandbox must not run with.
fn check_settings(settings: &SandboxSettings) -> Result<(), PodError> {
    for (field, id) in
        [("runAsUser", settings.run_as_user), ("runAsGroup", settings.run_as_group), ("fsGroup", settings.fs_group)]
    {
        if id <= 0 {
            return Err(settings_error(field, format!("must be a positive id, not root (is {id})")));
        }
    }
    if settings.image.trim().is_empty() {
        return Err(settings_error("image", "is required"));
    }
    if settings.sandbox_image.as_deref().is_some_and(|image| image.trim().is_empty()) {
        return Err(settings_error("sandboxImage", "must not be empty (leave it out to use image)"));
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
            && !crate::resources::validation::is_dns1123_subdomain(claim)
        {
            return Err(settings_error(field, format!("{claim:?} is not a PersistentVolumeClaim name")));
        }
    }
    let mut secrets = vec![("redisUrlSecret", &settings.redis_url_secret)];
    secrets.extend(settings.openai_api_key_secret.as_ref().map(|s| ("openaiApiKeySecret", s)));
    for (field, secret) in secrets {
        if !crate::resources::validation::is_dns1123_subdomain(&secret.name) {
            return Err(settings_error(&format!("{field}.name"), format!("{:?} is not a Secret name", secret.name)));
        }
        if secret.key.is_empty() {
            return Err(settings_error(&format!("{field}.key"), "is required"));
        }
    }
    if !settings.mcp_servers.is_empty() {
        let servers = serde_json::Value::Object(settings.mcp_servers.clone().into_iter().collect());
        serde_json::from_value::<crate::run::inputs::McpServers>(servers)
            .map_err(|e| settings_error("mcpServers", format!("is not a map of MCP servers ({{url, tools}}): {e}")))?;
    }
    Ok(())
}

/// A manifest for the inputs: the object's kind, name, namespace, uid, labels and spec, without its
/// status or the server's bookkeeping (managed fields, resource version), which the runner does not read.
fn input_manifest<K>(object: &K, key: &str) -> Result<String, PodError>
where
    K: Resource + Clone + Serialize,
{
    let mut object = object.clone();
    let meta = object.meta_mut();
    *meta = ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        uid: meta.uid.take(),
        labels: meta.labels.take(),
        ..ObjectMeta::default()
    };
    let mut value = serde_json::to_value(&object)
        .map_err(|e| PodError::Encode { field: key.to_string(), message: e.to_string() })?;
    if let Some(map) = value.as_object_mut() {
        map.remove("status");
    }
    serde_norway::to_string(&value).map_err(|e| PodError::Encode { field: key.to_string(), message: e.to_string() })
}

fn env(name: &str, value: &str) -> EnvVar {
    EnvVar { name: name.to_string(), value: Some(value.to_string()), value_from: None }
}

fn secret_env(name: &str, secret: &str, key: &str, optional: bool) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: secret.to_string(),
                key: key.to_string(),
                optional: optional.then_some(true),
            }),
            ..EnvVarSource::default()
        }),
    }
}

fn mount(volume: &str, path: &str, sub_path: Option<String>, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: volume.to_string(),
        mount_path: path.to_string(),
        sub_path,
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn claim_volume(name: &str, claim: &str, read_only: bool) -> Volume {
    Volume {
        name: name.to_string(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.to_string(),
            read_only: read_only.then_some(true),
        }),
        ..Volume::default()
    }
}

fn empty_dir(name: &str, size_limit: &Quantity, medium: Option<&str>) -> Volume {
    Volume {
        name: name.to_string(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(size_limit.clone()),
            medium: medium.map(str::to_string),
        }),
        ..Volume::default()
    }
}

/// A container's hardening: the restricted Pod Security Standard, and a read-only root filesystem.
fn container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".to_string()]), add: None }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        ..SecurityContext::default()
    }
}

/// The names of the volumes the scopes live on: one volume serves both when the skills are on the
/// user-data claim.
struct Volumes {
    user_data: &'static str,
    skills: &'static str,
}

impl Volumes {
    fn for_settings(settings: &SandboxSettings) -> Self {
        if settings.skills_claim == settings.user_data_claim {
            Volumes { user_data: "data", skills: "data" }
        } else {
            Volumes { user_data: "user-data", skills: "skills" }
        }
    }

    /// The pod's volumes: the claims, the inputs, the socket's folder and each container's `/tmp`.
    fn list(&self, run: &AgentRun, settings: &SandboxSettings) -> Vec<Volume> {
        let mut volumes = vec![claim_volume(self.user_data, &settings.user_data_claim, false)];
        if self.skills != self.user_data {
            volumes.push(claim_volume(self.skills, &settings.skills_claim, false));
        }
        if let Some(library) = &settings.skills_library_claim {
            volumes.push(claim_volume("skills-library", library, true));
        }
        volumes.push(Volume {
            name: "inputs".to_string(),
            config_map: Some(ConfigMapVolumeSource { name: inputs_name(run), ..ConfigMapVolumeSource::default() }),
            ..Volume::default()
        });
        volumes.push(empty_dir("sockets", &Quantity("1Mi".to_string()), Some("Memory")));
        volumes.push(empty_dir("runner-tmp", &settings.tmp_size_limit, None));
        volumes.push(empty_dir("sandbox-tmp", &settings.tmp_size_limit, None));
        volumes
    }

    /// The mounts both containers have: the four scopes (the skills read-only or not) and the socket's
    /// folder.
    fn scope_mounts(&self, scopes: &ScopeIds, skills_read_only: bool) -> Vec<VolumeMount> {
        let scope = |volume: &str, scope: Scope, read_only: bool| {
            mount(volume, scope.virtual_root(), Some(scopes.sub_path(scope)), read_only)
        };
        vec![
            scope(self.user_data, Scope::Workspace, false),
            scope(self.user_data, Scope::Uploads, false),
            scope(self.user_data, Scope::Outputs, false),
            scope(self.skills, Scope::Skills, skills_read_only),
            mount("sockets", SOCKET_DIR, None, false),
        ]
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

/// The runner: the graph, and the only holder of secrets (the model key and the run's credentials).
fn runner_container(run: &AgentRun, settings: &SandboxSettings, volumes: &Volumes, scopes: &ScopeIds) -> Container {
    let mut mounts = volumes.scope_mounts(scopes, false);
    mounts.push(mount("inputs", INPUTS_DIR, None, true));
    if settings.skills_library_claim.is_some() {
        mounts.push(mount("skills-library", SKILLS_LIBRARY_DIR, None, true));
    }
    mounts.push(mount("runner-tmp", "/tmp", None, false));
    let redis = &settings.redis_url_secret;
    let mut vars = vec![secret_env(env_names::REDIS_URL, &redis.name, &redis.key, false)];
    if let Some(secret) = &settings.openai_api_key_secret {
        vars.push(secret_env(env_names::OPENAI_API_KEY, &secret.name, &secret.key, true));
    }
    for (name, value) in [
        (env_names::OPENAI_BASE_URL, &settings.openai_base_url),
        (env_names::DEFAULT_MODEL, &settings.default_model),
        (env_names::FACADE_URL, &settings.facade_url),
    ] {
        if let Some(value) = value {
            vars.push(env(name, value));
        }
    }
    vars.push(secret_env(env_names::RUN_TOKEN, &credentials_secret_name(run), CREDENTIALS_TOKEN_KEY, true));
    if settings.skills_library_claim.is_some() {
        vars.push(env(env_names::SKILLS_LIBRARY, SKILLS_LIBRARY_DIR));
    }
    if !settings.mcp_servers.is_empty() {
        vars.push(env(env_names::MCP_SERVERS, &format!("{INPUTS_DIR}/{MCP_SERVERS_KEY}")));
    }
    Container {
        name: RUNNER_CONTAINER.to_string(),
        image: Some(settings.image.clone()),
        image_pull_policy: settings.image_pull_policy.clone(),
        command: Some(strings(&["yuxi-operator"])),
        args: Some(strings(&[
            "runner",
            "--run",
            &format!("{INPUTS_DIR}/{RUN_KEY}"),
            "--agent",
            &format!("{INPUTS_DIR}/{AGENT_KEY}"),
            "--sandbox-socket",
            SANDBOX_SOCKET,
        ])),
        env: Some(vars),
        resources: Some(settings.runner_resources.clone()),
        security_context: Some(container_security()),
        volume_mounts: Some(mounts),
        termination_message_policy: Some("FallbackToLogsOnError".to_string()),
        ..Container::default()
    }
}

/// The sandbox: the model's commands, with no secret and no environment; a native sidecar, so it starts
/// first and is stopped when the runner ends.
fn sandbox_container(settings: &SandboxSettings, volumes: &Volumes, scopes: &ScopeIds) -> Container {
    let mut mounts = volumes.scope_mounts(scopes, true);
    mounts.push(mount("sandbox-tmp", "/tmp", None, false));
    Container {
        name: SANDBOX_CONTAINER.to_string(),
        image: Some(settings.sandbox_image.clone().unwrap_or_else(|| settings.image.clone())),
        image_pull_policy: settings.image_pull_policy.clone(),
        command: Some(strings(&["yuxi-operator"])),
        args: Some(strings(&[
            "sandbox-exec",
            "--socket",
            SANDBOX_SOCKET,
            "--workdir",
            Scope::Workspace.virtual_root(),
        ])),
        restart_policy: Some("Always".to_string()),
        resources: Some(settings.sandbox_resources.clone()),
        security_context: Some(container_security()),
        volume_mounts: Some(mounts),
        ..Container::default()
    }
}

/// Builds the sandbox pod of `run` and the ConfigMap of its inputs (see the module's documentation for
/// their shape). `agent` must be the Agent the run names. Pure: the same inputs give the same objects.
///
/// Both objects get a controller owner reference to the run when it has a `metadata.uid` (it always does
/// in a cluster; a run read from a file may not, and then they get none).
///
/// Errors ([`PodError`], each naming its field): the run has no name; it names no user and the settings
/// give no `defaultUid`; an id that makes up a volume sub-path (`spec.uid`, `spec.threadId` or the run's
/// name, `spec.parent.fileThreadId` or `spec.parent.threadId`) is not an id of [`is_valid_id`](crate::run::thread_id::is_valid_id) (so `../x`,
/// `a/b` and `.hidden` are refused); `agent` is not the Agent the run names; a setting is unusable (a
/// root `runAsUser`, `runAsGroup` or `fsGroup`, an unknown `imagePullPolicy`, a claim or Secret that is
/// not a valid name, a negative `deadlineGraceSeconds`, malformed `mcpServers`).
pub fn sandbox_objects(run: &AgentRun, agent: &Agent, settings: &SandboxSettings) -> Result<SandboxObjects, PodError> {
    check_settings(settings)?;
    let run_name = run.metadata.name.as_deref().filter(|name| !name.is_empty()).ok_or(PodError::MissingName)?;
    let scopes = scopes(run, run_name, settings)?;
    if agent.name_any() != run.spec.agent {
        return Err(PodError::AgentMismatch { run_agent: run.spec.agent.clone(), agent: agent.name_any() });
    }
    let slug = &run.spec.agent;

    let labels = BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), APP_NAME.to_string()),
        ("app.kubernetes.io/managed-by".to_string(), MANAGED_BY.to_string()),
        (RUN_LABEL.to_string(), label_value(run_name)),
        (AGENT_LABEL.to_string(), label_value(slug)),
        (THREAD_LABEL.to_string(), label_value(&scopes.thread_id)),
    ]);
    let owner_references = run.metadata.uid.as_ref().map(|uid| {
        vec![OwnerReference {
            api_version: AgentRun::api_version(&()).into_owned(),
            kind: AgentRun::kind(&()).into_owned(),
            name: run_name.to_string(),
            uid: uid.clone(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]
    });

    // The inputs.
    let mut data = BTreeMap::from([
        (RUN_KEY.to_string(), input_manifest(run, RUN_KEY)?),
        (AGENT_KEY.to_string(), input_manifest(agent, AGENT_KEY)?),
    ]);
    if !settings.mcp_servers.is_empty() {
        let servers = serde_norway::to_string(&settings.mcp_servers)
            .map_err(|e| PodError::Encode { field: MCP_SERVERS_KEY.to_string(), message: e.to_string() })?;
        data.insert(MCP_SERVERS_KEY.to_string(), servers);
    }
    let inputs = ConfigMap {
        metadata: ObjectMeta {
            name: Some(inputs_name(run)),
            namespace: run.metadata.namespace.clone(),
            labels: Some(labels.clone()),
            owner_references: owner_references.clone(),
            ..ObjectMeta::default()
        },
        data: Some(data),
        immutable: Some(true),
        ..ConfigMap::default()
    };

    let volumes = Volumes::for_settings(settings);
    let runner = runner_container(run, settings, &volumes, &scopes);
    let sandbox = sandbox_container(settings, &volumes, &scopes);

    let mut pod_labels = settings.pod_labels.clone();
    pod_labels.extend(labels);
    let mut annotations = settings.pod_annotations.clone();
    annotations.insert(THREAD_ANNOTATION.to_string(), scopes.thread_id.clone());
    let timeout = run.spec.timeout_seconds.map_or(DEFAULT_TIMEOUT_SECONDS as i64, |t| t.max(1));
    let pod = Pod {
        metadata: ObjectMeta {
            name: Some(pod_name(run)),
            namespace: run.metadata.namespace.clone(),
            labels: Some(pod_labels),
            annotations: Some(annotations),
            owner_references,
            ..ObjectMeta::default()
        },
        spec: Some(PodSpec {
            init_containers: Some(vec![sandbox]),
            containers: vec![runner],
            volumes: Some(volumes.list(run, settings)),
            restart_policy: Some("Never".to_string()),
            active_deadline_seconds: Some(timeout + settings.deadline_grace_seconds),
            automount_service_account_token: Some(false),
            enable_service_links: Some(false),
            share_process_namespace: Some(false),
            host_users: settings.host_users,
            os: Some(PodOS { name: "linux".to_string() }),
            security_context: Some(PodSecurityContext {
                run_as_non_root: Some(true),
                run_as_user: Some(settings.run_as_user),
                run_as_group: Some(settings.run_as_group),
                fs_group: Some(settings.fs_group),
                fs_group_change_policy: Some("OnRootMismatch".to_string()),
                seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".to_string(), localhost_profile: None }),
                ..PodSecurityContext::default()
            }),
            runtime_class_name: settings.runtime_class_name.clone(),
            priority_class_name: settings.priority_class_name.clone(),
            node_selector: (!settings.node_selector.is_empty()).then(|| settings.node_selector.clone()),
            tolerations: (!settings.tolerations.is_empty()).then(|| settings.tolerations.clone()),
            image_pull_secrets: (!settings.image_pull_secrets.is_empty()).then(|| {
                settings.image_pull_secrets.iter().map(|name| LocalObjectReference { name: name.clone() }).collect()
            }),
            ..PodSpec::default()
        }),
        status: None,
    };
    Ok(SandboxObjects { pod, inputs })
}

/// The two objects as YAML: the pod, then `---`, then the inputs ConfigMap.
///
/// The YAML reads the same to YAML 1.2 readers and to the YAML 1.1 ones `kubectl` and most tools use: a
/// string that either could take for something else (`on`, `no`, `y`, `1:20`, `0x1f`, `~`, a leading
/// space) is double-quoted, multi-line strings (the inputs' manifests) are literal blocks.
///
/// Errors: [`PodError::Encode`] when an object cannot be turned into JSON (not expected for built
/// objects).
pub fn to_yaml(objects: &SandboxObjects) -> Result<String, PodError> {
    let json = |field: &str, object: Result<serde_json::Value, serde_json::Error>| {
        object.map_err(|e| PodError::Encode { field: field.to_string(), message: e.to_string() })
    };
    let pod = json("pod", serde_json::to_value(&objects.pod))?;
    let inputs = json("configmap", serde_json::to_value(&objects.inputs))?;
    Ok(format!("{}---\n{}", yaml::document(&pod), yaml::document(&inputs)))
}

/// A small YAML emitter for JSON values that quotes every string a YAML 1.1 or 1.2 reader could take for
/// anything but that string (serde_norway follows YAML 1.2 only, and writes `on` or `yes` plain, which
/// `kubectl` reads as booleans).
mod yaml {
    use serde_json::{Map, Value};

    /// Words that YAML 1.1 or 1.2 reads as booleans or null, compared without case.
    const RESERVED: [&str; 9] = ["y", "yes", "n", "no", "true", "false", "on", "off", "null"];

    /// `value` as one YAML document, ending in a line break.
    pub fn document(value: &Value) -> String {
        let mut out = String::new();
        match value {
            Value::Object(map) if !map.is_empty() => mapping(&mut out, map, 0, false),
            Value::Array(items) if !items.is_empty() => sequence(&mut out, items, 0),
            scalar => {
                out.push_str(&scalar_text(scalar, 2));
                out.push('\n');
            }
        }
        out
    }

    fn mapping(out: &mut String, map: &Map<String, Value>, indent: usize, first_inline: bool) {
        for (i, (key, value)) in map.iter().enumerate() {
            if i > 0 || !first_inline {
                out.push_str(&" ".repeat(indent));
            }
            out.push_str(&if is_plain(key) { key.clone() } else { quoted(key) });
            out.push(':');
            child(out, value, indent, false);
        }
    }

    fn sequence(out: &mut String, items: &[Value], indent: usize) {
        for item in items {
            out.push_str(&" ".repeat(indent));
            out.push('-');
            child(out, item, indent, true);
        }
    }

    /// A value after `key:` or `-`, whose line is indented by `indent`.
    fn child(out: &mut String, value: &Value, indent: usize, in_sequence: bool) {
        match value {
            Value::Object(map) if !map.is_empty() => {
                if in_sequence {
                    out.push(' ');
                    mapping(out, map, indent + 2, true);
                } else {
                    out.push('\n');
                    mapping(out, map, indent + 2, false);
                }
            }
            Value::Array(items) if !items.is_empty() => {
                out.push('\n');
                sequence(out, items, if in_sequence { indent + 2 } else { indent });
            }
            scalar => {
                out.push(' ');
                out.push_str(&scalar_text(scalar, indent + 2));
                out.push('\n');
            }
        }
    }

    fn scalar_text(value: &Value, indent: usize) -> String {
        match value {
            Value::Null => "null".to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Number(n) => n.to_string(),
            Value::String(s) if is_plain(s) => s.clone(),
            Value::String(s) if is_literal(s) => literal(s, indent),
            Value::String(s) => quoted(s),
            Value::Object(_) => "{}".to_string(),
            Value::Array(_) => "[]".to_string(),
        }
    }

    /// Whether `s` reads as itself unquoted: it starts with a letter or `/`, holds only letters, digits,
    /// spaces and `. _ / - : @ + ,`, is no reserved word, and has no `: `, ` #`, or space at its end.
    pub(super) fn is_plain(s: &str) -> bool {
        s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '/')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || " ._/-:@+,".contains(c))
            && !RESERVED.iter().any(|word| s.eq_ignore_ascii_case(word))
            && !s.contains(": ")
            && !s.contains(" #")
            && !s.ends_with([' ', ':'])
    }

    /// Whether `s` can be a literal block: several lines of printable text, not starting with a space or
    /// a blank line (which would need an indentation indicator).
    fn is_literal(s: &str) -> bool {
        s.contains('\n')
            && !s.starts_with([' ', '\n'])
            && s.chars().all(|c| c == '\n' || c == '\t' || !(c.is_control() || is_unusual(c)))
    }

    /// Characters some readers refuse unescaped.
    fn is_unusual(c: char) -> bool {
        matches!(c, '\u{feff}' | '\u{2028}' | '\u{2029}' | '\u{fffe}' | '\u{ffff}')
    }

    /// A literal block (`|`, `|-` or `|+` by its trailing line breaks), its lines indented by `indent`.
    fn literal(s: &str, indent: usize) -> String {
        let (body, chomping) = match s.strip_suffix('\n') {
            Some(body) if body.ends_with('\n') => (body, "+"),
            Some(body) => (body, ""),
            None => (s, "-"),
        };
        let mut out = format!("|{chomping}");
        for line in body.split('\n') {
            out.push('\n');
            if !line.is_empty() {
                out.push_str(&" ".repeat(indent));
                out.push_str(line);
            }
        }
        out
    }

    /// `s` double-quoted, with every control or unusual character escaped.
    pub(super) fn quoted(s: &str) -> String {
        let mut out = String::with_capacity(s.len() + 2);
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                c if c.is_control() || is_unusual(c) => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }
}

/// The `sandbox-pod` command's work (the one part of this module that reads files): reads the AgentRun
/// manifest `run_file`, the Agent manifest `agent_file` and the settings file `settings_file` (YAML of
/// [`SandboxSettings`]; none: the defaults), checks the run and the agent by the admission rules, and
/// returns [`to_yaml`] of their [`sandbox_objects`].
///
/// Errors: one line naming the file and the field: a file that cannot be read, is not YAML, does not hold
/// exactly one AgentRun (or Agent), breaks an admission rule, or cannot give a pod ([`PodError`]).
pub fn sandbox_pod_yaml(run_file: &Path, agent_file: &Path, settings_file: Option<&Path>) -> Result<String, String> {
    use crate::resources::manifest::{Manifest, read_manifest_file};
    use crate::resources::validation::{validate_agent, validate_agent_run};

    let run = match read_manifest_file(run_file).map_err(|e| format!("{}: {e}", run_file.display()))?.as_slice() {
        [Manifest::AgentRun(run)] => (**run).clone(),
        _ => return Err(format!("{}: must hold exactly one AgentRun", run_file.display())),
    };
    let report = validate_agent_run(&run);
    if !report.is_ok() {
        return Err(format!("{}: {}", run_file.display(), report.error_summary()));
    }
    let agent = match read_manifest_file(agent_file).map_err(|e| format!("{}: {e}", agent_file.display()))?.as_slice() {
        [Manifest::Agent(agent)] => (**agent).clone(),
        _ => return Err(format!("{}: must hold exactly one Agent", agent_file.display())),
    };
    let report = validate_agent(&agent);
    if !report.is_ok() {
        return Err(format!("{}: {}", agent_file.display(), report.error_summary()));
    }
    let settings = match settings_file {
        Some(path) => {
            let text =
                crate::resources::manifest::read_manifest_text(path).map_err(|e| format!("{}: {e}", path.display()))?;
            SandboxSettings::from_yaml(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => SandboxSettings::default(),
    };
    let objects = sandbox_objects(&run, &agent, &settings).map_err(|err| {
        let file = match (&err, settings_file) {
            (PodError::Settings { .. }, Some(path)) => path.display().to_string(),
            (PodError::Settings { .. }, None) => "the default settings".to_string(),
            (PodError::AgentMismatch { .. }, _) => agent_file.display().to_string(),
            _ => run_file.display().to_string(),
        };
        format!("{file}: {err}")
    })?;
    to_yaml(&objects).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests;
