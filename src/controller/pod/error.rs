//! Why no sandbox pod can be built for a run, each reason naming the field at fault.

use crate::run::scope::{ID_RULE, NotAPathSegment};

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
    /// The run runs on a Model resource, and the Model given is not it (or none was given).
    #[error("{field}: the run runs on the Model {wanted:?}, but {given}")]
    ModelMismatch {
        /// Where the Model's name came from: `spec.model` or the Agent's `spec.context.model`.
        field: String,
        /// The Model the run runs on.
        wanted: String,
        /// What was given instead (`no Model was given`, `the Model given is "x"`).
        given: String,
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
            | PodError::ModelMismatch { field, .. }
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
