//! `openai/<model>`: any OpenAI-compatible chat-completions endpoint (OpenAI, vLLM, Ollama, LiteLLM,
//! DeepSeek, DashScope...), streamed, with tool calling, through the `async-openai` client.
//!
//! The streamed chunks are read into a minimal, lenient shape of our own, so that servers which omit
//! fields OpenAI always sends (`created`, `object`, ids) still work.

use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::ReqwestService;
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::turn::{ModelDelta, ModelError, ModelTurn};
use crate::resources::TokenUsage;
use crate::run::message::{Message, ToolCall};
use crate::runner::tools::ToolSpec;

/// How long to wait for a connection to the endpoint.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the endpoint may stay silent while a turn streams.
const READ_TIMEOUT: Duration = Duration::from_secs(120);

/// Where an OpenAI-compatible endpoint is and how to authenticate to it.
#[derive(Clone)]
pub struct OpenAiEndpoint {
    /// The API base, such as `https://api.openai.com/v1` or `http://vllm:8000/v1`.
    pub base_url: String,
    /// The bearer key; empty for endpoints that need none.
    pub api_key: String,
}

impl std::fmt::Debug for OpenAiEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiEndpoint").field("base_url", &self.base_url).field("api_key", &"<redacted>").finish()
    }
}

/// One model of an OpenAI-compatible endpoint.
pub struct OpenAiModel {
    client: Client<OpenAIConfig>,
    model: String,
}

/// An OpenAI-compatible model cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum OpenAiSetupError {
    /// The HTTP client for the endpoint cannot be built (its TLS backend cannot start).
    #[error("cannot build the HTTP client: {source}")]
    HttpClient {
        /// The endpoint's base URL.
        base_url: String,
        /// Why.
        source: reqwest::Error,
    },
}

impl OpenAiModel {
    /// A client for `model` at `endpoint`. Errors: [`OpenAiSetupError::HttpClient`], naming the endpoint.
    pub fn new(endpoint: OpenAiEndpoint, model: &str) -> Result<Self, OpenAiSetupError> {
        crate::tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .build()
            .map_err(|source| OpenAiSetupError::HttpClient { base_url: endpoint.base_url.clone(), source })?;
        let config = OpenAIConfig::new().with_api_base(endpoint.base_url).with_api_key(endpoint.api_key);
        // The plain transport, without the client's own retry layer: retries follow the agent's
        // modelRetryTimes, in the graph, where they are visible as events.
        let client = Client::build(http.clone(), config).with_http_service(ReqwestService::new(http));
        Ok(Self { client, model: model.to_string() })
    }

    /// Streams one turn. Errors are classified as transient or fatal (see [`ModelError`]).
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<ModelTurn, ModelError> {
        let mut request = json!({
            "model": self.model,
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if !tools.is_empty() {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                .collect();
            request["tools"] = Value::Array(tools);
        }
        let mut stream = self.client.chat().create_stream_byot::<_, Chunk>(request).await.map_err(classify)?;
        let mut turn = ModelTurn::default();
        let mut calls: Vec<PartialCall> = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(classify)?;
            if let Some(usage) = chunk.usage {
                turn.usage = Some(TokenUsage {
                    prompt_tokens: usage.prompt_tokens,
                    completion_tokens: usage.completion_tokens,
                    total_tokens: usage.total_tokens,
                    cached_prompt_tokens: 0,
                });
            }
            for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
                let delta = choice.delta;
                if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
                    turn.content.push_str(&text);
                    let _ = deltas.send(ModelDelta::Content(text));
                }
                if let Some(text) = delta.reasoning_content.filter(|t| !t.is_empty()) {
                    let _ = deltas.send(ModelDelta::Reasoning(text));
                }
                for part in delta.tool_calls.into_iter().flatten() {
                    let index = part.index;
                    let call = match calls.iter_mut().find(|c| c.index == index) {
                        Some(call) => call,
                        None => {
                            calls.push(PartialCall { index, ..PartialCall::default() });
                            calls.last_mut().expect("just pushed")
                        }
                    };
                    if let Some(id) = part.id.filter(|id| !id.is_empty()) {
                        call.id = id;
                    }
                    if let Some(function) = part.function {
                        if let Some(name) = function.name.filter(|n| !n.is_empty()) {
                            call.name = name;
                        }
                        if let Some(arguments) = function.arguments {
                            call.arguments.push_str(&arguments);
                        }
                    }
                }
            }
        }
        calls.sort_by_key(|c| c.index);
        turn.tool_calls = calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let id = if c.id.is_empty() { format!("call_{i}") } else { c.id };
                ToolCall::new(id, c.name, c.arguments)
            })
            .collect();
        Ok(turn)
    }
}

/// Rate limits, server errors, time-outs and broken connections are transient; the rest is fatal.
fn classify(err: OpenAIError) -> ModelError {
    match err {
        OpenAIError::ApiError(response) => {
            let status = response.status_code;
            let message = format!("the model endpoint answered {status}: {}", response.api_error.message);
            if status.as_u16() == 408 || status.as_u16() == 429 || status.is_server_error() {
                ModelError::Transient(message)
            } else {
                ModelError::Fatal(message)
            }
        }
        OpenAIError::Reqwest(e) => {
            let message = format!("cannot reach the model endpoint: {e}");
            if e.is_timeout() || e.is_connect() || e.is_request() || e.is_body() {
                ModelError::Transient(message)
            } else {
                ModelError::Fatal(message)
            }
        }
        OpenAIError::StreamError(e) => ModelError::Transient(format!("the model's stream broke: {e}")),
        OpenAIError::JSONDeserialize(e, content) => {
            let content: String = content.chars().take(200).collect();
            ModelError::Fatal(format!(
                "the model endpoint sent an answer that is not a chat completion ({e}): {content}"
            ))
        }
        other => ModelError::Fatal(other.to_string()),
    }
}

#[derive(Default)]
struct PartialCall {
    index: u32,
    id: String,
    name: String,
    arguments: String,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Delta,
}

#[derive(Default, Deserialize)]
struct Delta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallPart>>,
}

#[derive(Deserialize)]
struct ToolCallPart {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionPart>,
}

#[derive(Deserialize)]
struct FunctionPart {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: i64,
    #[serde(default)]
    completion_tokens: i64,
    #[serde(default)]
    total_tokens: i64,
}
