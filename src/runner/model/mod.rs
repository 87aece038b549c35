//! Chat models: the `Model` resources' providers (OpenAI and OpenAI-compatible servers, Azure OpenAI,
//! Anthropic, Gemini, Bedrock, each through its own API), the installation's OpenAI-compatible endpoint
//! (`openai/<model>`) and the offline `scripted` provider.
//!
//! A model turn streams its text as [`ModelDelta`]s while it is generated and returns the whole turn
//! (text, tool calls, token usage) at the end. Every client sends a Model's extra headers, trusts its CA
//! bundle in place of the system's roots, maps its parameters onto the provider's fields, and reads the
//! provider's errors into the same [`ModelError`]s ([`http`]).

pub use crate::endpoints::connection;
pub mod anthropic;
pub mod aws;
pub mod bedrock;
mod conversation;
pub mod errors;
pub mod gemini;
pub mod http;
pub mod openai;
pub mod scripted;
pub mod sse;
pub mod title;
mod turn;

use tokio::sync::mpsc::UnboundedSender;

use super::tools::ToolSpec;
use crate::run::message::Message;

pub use anthropic::AnthropicModel;
pub use bedrock::BedrockModel;
pub use gemini::GeminiModel;
pub use http::SetupError;
pub use openai::{OpenAiEndpoint, OpenAiModel};
pub use scripted::{ScriptError, ScriptedModel};
pub use turn::{ModelDelta, ModelError, ModelTurn};

/// A model id cannot be resolved to a model.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The id is not of the form `<provider>/<model>`.
    #[error("model {id:?} is not of the form <provider>/<model> (providers: openai, scripted)")]
    NotAModelId {
        /// The model id.
        id: String,
    },
    /// The provider is neither `openai` nor `scripted`.
    #[error("model {id:?} names the unknown provider {provider:?} (providers: openai, scripted)")]
    UnknownProvider {
        /// The model id.
        id: String,
        /// Its provider.
        provider: String,
    },
    /// `openai/<model>`, but no endpoint is configured.
    #[error("model {id:?} needs an OpenAI-compatible endpoint: set OPENAI_BASE_URL (and OPENAI_API_KEY)")]
    NoEndpoint {
        /// The model id.
        id: String,
    },
    /// The model's client cannot be set up (its HTTP client, CA bundle, headers or endpoint).
    #[error(transparent)]
    Setup(#[from] http::SetupError),
    /// The scripted model cannot be made.
    #[error(transparent)]
    Scripted(#[from] scripted::ScriptError),
    /// The Model cannot be connected from here (a referenced key is not there).
    #[error(transparent)]
    Connection(connection::ConnectionError),
    /// The id names a Model resource this runner was not given.
    #[error("model {name:?} is not a Model this run may use (known here: {known})")]
    UnknownModel {
        /// The Model's name.
        name: String,
        /// The Models the runner was given, comma-separated, or `none`.
        known: String,
    },
}

/// A chat model a run talks to.
pub enum Model {
    /// An OpenAI-compatible chat-completions endpoint, or an Azure OpenAI deployment.
    OpenAi(OpenAiModel),
    /// Anthropic's Messages API.
    Anthropic(AnthropicModel),
    /// Google's Gemini API.
    Gemini(GeminiModel),
    /// Amazon Bedrock's Converse API.
    Bedrock(BedrockModel),
    /// A fixed script of turns, for tests and demos without an endpoint.
    Scripted(ScriptedModel),
}

/// Where models come from.
#[derive(Clone, Debug, Default)]
pub struct ModelSettings {
    /// The OpenAI-compatible endpoint of `openai/<model>`; `None` when none is configured.
    pub openai: Option<OpenAiEndpoint>,
    /// The folder `scripted/file:<name>` scripts are read from; `None` disables them.
    pub scripts_dir: Option<std::path::PathBuf>,
    /// The Model resources runs may name, by `metadata.name`: in a pod, the one Model of its run; in the
    /// local mode, those of the manifests folder, each connected or with why it cannot be (a key that is
    /// not there), which a run on it fails with.
    pub resources: std::collections::BTreeMap<String, Result<connection::Connection, connection::ConnectionError>>,
}

impl Model {
    /// Says that `calls` model calls of this run were made before (a resumed run's): a script goes on
    /// with its next turn; an endpoint has nothing to keep.
    pub fn continue_after(&self, calls: u32) {
        if let Model::Scripted(script) = self {
            script.continue_after(calls as usize);
        }
    }

    /// Resolves a model id: `openai/<model>`, `scripted/echo` or `scripted/file:<name>`.
    ///
    /// Errors: an id not of the form `<provider>/<model>` ([`ResolveError::NotAModelId`]), an unknown
    /// provider ([`ResolveError::UnknownProvider`]), `openai/` without a configured endpoint
    /// ([`ResolveError::NoEndpoint`]) or whose client cannot be built ([`ResolveError::Setup`]), or an
    /// unknown, unreadable or malformed script ([`ResolveError::Scripted`]), each with a message naming
    /// what to fix.
    pub fn resolve(id: &str, settings: &ModelSettings) -> Result<Model, ResolveError> {
        if !id.contains('/') {
            let connection = settings.resources.get(id).ok_or_else(|| ResolveError::UnknownModel {
                name: id.to_string(),
                known: if settings.resources.is_empty() {
                    "none".to_string()
                } else {
                    settings.resources.keys().cloned().collect::<Vec<_>>().join(", ")
                },
            })?;
            return match connection {
                Ok(connection) => Model::connect(connection),
                Err(err) => Err(ResolveError::Connection(err.clone())),
            };
        }
        let (provider, name) = id
            .split_once('/')
            .filter(|(p, n)| !p.is_empty() && !n.is_empty())
            .ok_or_else(|| ResolveError::NotAModelId { id: id.to_string() })?;
        match provider {
            "openai" => {
                let endpoint =
                    settings.openai.clone().ok_or_else(|| ResolveError::NoEndpoint { id: id.to_string() })?;
                Ok(Model::OpenAi(OpenAiModel::new(endpoint, name)?))
            }
            "scripted" => Ok(Model::Scripted(ScriptedModel::from_name(name, settings.scripts_dir.as_deref())?)),
            other => Err(ResolveError::UnknownProvider { id: id.to_string(), provider: other.to_string() }),
        }
    }

    /// A client for the Model resource `connection` describes, whichever its provider.
    ///
    /// Errors: [`ResolveError::Setup`] when its client cannot be built (an unreadable CA bundle, a header
    /// that cannot be sent, an endpoint without what its provider needs).
    pub fn connect(connection: &connection::Connection) -> Result<Model, ResolveError> {
        use crate::resources::model::ModelProvider;
        Ok(match connection.endpoint.provider {
            ModelProvider::OpenAI | ModelProvider::OpenAICompatible | ModelProvider::AzureOpenAI => {
                Model::OpenAi(OpenAiModel::connect(connection)?)
            }
            ModelProvider::Anthropic => Model::Anthropic(AnthropicModel::connect(connection)?),
            ModelProvider::Gemini => Model::Gemini(GeminiModel::connect(connection)?),
            ModelProvider::Bedrock => Model::Bedrock(BedrockModel::connect(connection)?),
        })
    }

    /// Runs one model turn on `messages` with `tools` offered, streaming its text to `deltas`.
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<ModelTurn, ModelError> {
        match self {
            Model::OpenAi(model) => model.complete(messages, tools, deltas).await,
            Model::Anthropic(model) => model.complete(messages, tools, deltas).await,
            Model::Gemini(model) => model.complete(messages, tools, deltas).await,
            Model::Bedrock(model) => model.complete(messages, tools, deltas).await,
            Model::Scripted(model) => model.complete(messages, deltas).await,
        }
    }
}
