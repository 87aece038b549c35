//! The sandbox pod builder: a pure function from an AgentRun, the Agent it names and the sandbox settings
//! to the two objects the run needs, its Pod and the Secret of its inputs (DESIGN.md sections 3 and 5).
//! The controller creates what [`sandbox_objects`] returns; `yuxi-operator sandbox-pod` prints it.
//!
//! This module assembles the objects and owns their errors ([`PodError`]); the parts are built by the
//! files that name them: `settings` (the settings, their defaults and rules), `volumes` (the volumes,
//! the mounts and the run's ids behind their sub-paths), `containers` (the runner and the sandbox),
//! `security` (the security contexts), `inputs` (the inputs Secret) and `command` (the
//! `sandbox-pod` command, which reads the files). The YAML writer is [`crate::resources::yaml`].
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
//! | `/home/gem/user-data/uploads` | user-data claim, `users/<uid>/threads/<file_thread_id>/uploads` | rw | rw |
//! | `/home/gem/user-data/outputs` | user-data claim, `users/<uid>/threads/<file_thread_id>/outputs` | rw | rw |
//! | `/home/gem/skills` | skills claim, `users/<uid>/skills/<thread_id>` | rw (skills projected at start) | ro |
//! | `/var/lib/yuxi/skills-library` | skills library claim (when configured) | ro | — |
//! | `/etc/yuxi/inputs` | the inputs Secret (`run.yaml`, `agent.yaml`, `mcp-servers.yaml`) | ro | — |
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

mod command;
mod containers;
mod credentials;
mod error;
mod inputs;
mod namespace_traces;
pub(crate) mod security;
pub(crate) mod settings;
mod volumes;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{LocalObjectReference, Pod, PodOS, PodSpec, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

pub use command::{SandboxPodError, SandboxPodOutput, sandbox_pod_text};
pub use containers::{RUNNER_CONTAINER, SANDBOX_CONTAINER};
pub use credentials::{CredentialsVerdict, credentials_verdict, without_credentials};
pub use error::PodError;
pub use namespace_traces::{NAMESPACE_TRACES_CONFIG_MAP, namespace_traces};
pub use settings::{SandboxSettings, SecretKey, SettingsError, TraceExport};

use crate::resources::names::{
    AGENT_LABEL, APP_NAME, MANAGED_BY, RUN_LABEL, THREAD_ANNOTATION, THREAD_LABEL, label_value, pod_name,
};
use crate::resources::yaml;
use crate::resources::{Agent, AgentRun, Model};
use crate::run::inputs::DEFAULT_TIMEOUT_SECONDS;
use containers::{runner_container, sandbox_container};
use inputs::inputs_secret;
use security::pod_security;
use settings::check_settings;
use volumes::{Volumes, scope_ids};

/// What a run needs created: its pod, and the Secret of its inputs (`run.yaml`, the AgentRun manifest,
/// and `agent.yaml`, the Agent manifest, as YAML the runner reads with `--run` and `--agent`; plus
/// `mcp-servers.yaml` when MCP servers are configured). Both carry the same labels and owner reference.
#[derive(Clone, Debug, PartialEq)]
pub struct SandboxObjects {
    /// The sandbox pod.
    pub pod: Pod,
    /// The inputs, named by [`inputs_name`](crate::resources::names::inputs_name); immutable.
    pub inputs: Secret,
}

/// Builds the sandbox pod of `run` and the Secret of its inputs (see the module's documentation for
/// their shape). `agent` must be the Agent the run names. Pure: the same inputs give the same objects.
///
/// Both objects get a controller owner reference to the run when it has a `metadata.uid` (it always does
/// in a cluster; a run read from a file may not, and then they get none).
///
/// Errors ([`PodError`], each naming its field): the run has no name; it names no user and the settings
/// give no `defaultUid`; an id that makes up a volume sub-path (`spec.uid`, `spec.threadId` or the run's
/// name, `spec.parent.fileThreadId` or `spec.parent.threadId`) is not an id of
/// [`is_valid_id`](crate::run::thread_id::is_valid_id) (so `../x`, `a/b` and `.hidden` are refused); `agent` is not the Agent the run names; a setting is unusable (a
/// root `runAsUser`, `runAsGroup` or `fsGroup`, an unknown `imagePullPolicy`, a claim or Secret that is
/// not a valid name, a negative `deadlineGraceSeconds`, malformed `mcpServers`).
pub fn sandbox_objects(run: &AgentRun, agent: &Agent, settings: &SandboxSettings) -> Result<SandboxObjects, PodError> {
    sandbox_objects_on(run, agent, None, settings)
}

/// [`sandbox_objects`] for a run whose model may be a Model resource, given as `model`: the Model goes
/// into the inputs (`model.yaml`), and the values it references (its key, Secret headers, AWS keys, CA
/// bundle) become variables of the runner container only, from `secretKeyRef`/`configMapKeyRef` of the
/// run's namespace; the installation's own model key (`OPENAI_API_KEY`) is then not given at all.
///
/// Errors: those of [`sandbox_objects`], and [`PodError::ModelMismatch`] when the run runs on a Model
/// resource ([`crate::resources::model::resource_name`]) and `model` is not that Model.
pub fn sandbox_objects_on(
    run: &AgentRun,
    agent: &Agent,
    model: Option<&Model>,
    settings: &SandboxSettings,
) -> Result<SandboxObjects, PodError> {
    check_settings(settings)?;
    let run_name = run.metadata.name.as_deref().filter(|name| !name.is_empty()).ok_or(PodError::MissingName)?;
    let scopes = scope_ids(run, run_name, settings)?;
    if agent.name_any() != run.spec.agent {
        return Err(PodError::AgentMismatch { run_agent: run.spec.agent.clone(), agent: agent.name_any() });
    }
    let slug = &run.spec.agent;
    let model = check_model(run, agent, model, settings)?;

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

    let inputs = inputs_secret(run, agent, model, settings, labels.clone(), owner_references.clone())?;

    let volumes = Volumes::for_settings(settings);
    let runner = runner_container(run, agent, model, settings, &volumes, &scopes);
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
            security_context: Some(pod_security(settings)),
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

/// The Model the run runs on, when it runs on a Model resource: `model`, checked to be the one named.
fn check_model<'a>(
    run: &AgentRun,
    agent: &Agent,
    model: Option<&'a Model>,
    settings: &SandboxSettings,
) -> Result<Option<&'a Model>, PodError> {
    let context = agent.spec.context();
    let named = crate::resources::model::effective(
        run.spec.model.as_deref(),
        context.model.as_deref(),
        settings.default_model.as_deref(),
    )
    .and_then(crate::resources::model::resource_name);
    let Some(wanted) = named else { return Ok(None) };
    let field = if run.spec.model.as_deref().is_some_and(|m| !m.is_empty()) {
        "spec.model"
    } else if context.model.as_deref().is_some_and(|m| !m.is_empty()) {
        "agent spec.context.model"
    } else {
        "sandbox settings defaultModel"
    };
    match model {
        Some(model) if model.name_any() == wanted => Ok(Some(model)),
        other => Err(PodError::ModelMismatch {
            field: field.to_string(),
            wanted: wanted.to_string(),
            given: other
                .map_or_else(|| "no Model was given".to_string(), |m| format!("the Model given is {:?}", m.name_any())),
        }),
    }
}

/// The two objects as YAML ([`objects_to_yaml`](yaml::objects_to_yaml)): the pod, then `---`, then the
/// inputs Secret.
///
/// The YAML reads the same to YAML 1.2 readers and to the YAML 1.1 ones `kubectl` and most tools use: a
/// string that either could take for something else (`on`, `no`, `y`, `1:20`, `0x1f`, `~`, a leading
/// space) is double-quoted, multi-line strings (the inputs' manifests) are literal blocks.
///
/// Errors: [`PodError::Encode`] when an object cannot be turned into JSON (not expected for built
/// objects).
pub fn to_yaml(objects: &SandboxObjects) -> Result<String, PodError> {
    let [pod, inputs] = object_values(objects)?;
    Ok(yaml::objects_to_yaml(&[pod, inputs]))
}

/// The two objects as one JSON document, a `v1` `List` of the pod and the inputs Secret (which `kubectl`
/// applies as it is, and a program reads without a YAML parser), indented, with a final newline.
///
/// Errors: [`PodError::Encode`], as [`to_yaml`].
pub fn to_json(objects: &SandboxObjects) -> Result<String, PodError> {
    let [pod, inputs] = object_values(objects)?;
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [pod, inputs]});
    let text = serde_json::to_string_pretty(&list)
        .map_err(|e| PodError::Encode { field: "list".to_string(), message: e.to_string() })?;
    Ok(text + "\n")
}

fn object_values(objects: &SandboxObjects) -> Result<[serde_json::Value; 2], PodError> {
    let json = |field: &str, object: Result<serde_json::Value, serde_json::Error>| {
        object.map_err(|e| PodError::Encode { field: field.to_string(), message: e.to_string() })
    };
    Ok([json("pod", serde_json::to_value(&objects.pod))?, json("inputs", serde_json::to_value(&objects.inputs))?])
}

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;
