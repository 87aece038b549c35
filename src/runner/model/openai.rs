//! OpenAI's Chat Completions API, streamed, with tool calling: OpenAI itself, any OpenAI-compatible
//! server (vLLM, Ollama, LiteLLM, DeepSeek, DashScope...) and Azure OpenAI's deployments.
//!
//! - OpenAI and compatible servers: `POST {base}/chat/completions`, `Authorization: Bearer <key>` (no
//!   header without a key).
//! - Azure OpenAI: `POST {base}/openai/deployments/{deployment}/chat/completions?api-version={v}`, the
//!   key in `api-key`; the deployment names the model, so the body names none.
//!
//! The streamed chunks are read into a minimal, lenient shape of our own, so that servers which omit
//! fields OpenAI always sends (`created`, `object`, ids) still work. A Model's parameters map onto
//! `temperature`, `reasoning_effort` (lowercase) and the answer's length: `max_completion_tokens` for
//! OpenAI and Azure (which refuse `max_tokens` for reasoning models), `max_tokens` for compatible
//! servers (the field they all read).

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::connection::{Connection, Credentials};
use super::errors::transient_kind;
use super::http::{Http, SetupError};
use super::sse::{Flow, read_events};
use super::turn::{ModelDelta, ModelError, ModelTurn};
use crate::resources::TokenUsage;
use crate::resources::model::{ModelParameters, ModelProvider, ReasoningEffort};
use crate::run::message::{Message, ToolCall};
use crate::runner::tools::ToolSpec;

/// Where an OpenAI-compatible endpoint is and how to authenticate to it (the installation's single
/// endpoint of `openai/<model>` ids).
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

/// One model of an OpenAI-compatible endpoint or an Azure OpenAI deployment.
pub struct OpenAiModel {
    http: Http,
    url: String,
    /// The body's `model`; `None` for Azure, whose URL names the deployment.
    model: Option<String>,
    parameters: ModelParameters,
    /// `max_completion_tokens` (OpenAI, Azure) or `max_tokens` (compatible servers).
    max_tokens_field: &'static str,
}

impl OpenAiModel {
    /// A client for `model` at `endpoint` (an `openai/<model>` id), read as a compatible server.
    /// Errors: [`SetupError::HttpClient`], [`SetupError::Header`] (a key that is not visible ASCII).
    pub fn new(endpoint: OpenAiEndpoint, model: &str) -> Result<Self, SetupError> {
        let auth = bearer(&endpoint.api_key);
        let http = Http::new(model, None, &auth, &[], vec![endpoint.api_key.clone()])?;
        Ok(Self {
            http,
            url: format!("{}/chat/completions", endpoint.base_url.trim_end_matches('/')),
            model: Some(model.to_string()),
            parameters: ModelParameters::default(),
            max_tokens_field: "max_tokens",
        })
    }

    /// A client for an `OpenAI`, `OpenAICompatible` or `AzureOpenAI` Model: its endpoint, key, extra
    /// headers, CA bundle and parameters. Errors: those of [`Http::for_connection`], and
    /// [`SetupError::Endpoint`] for Azure without an API version.
    pub fn connect(connection: &Connection) -> Result<Self, SetupError> {
        let endpoint = &connection.endpoint;
        let key = match &connection.credentials {
            Credentials::ApiKey(key) => key.clone(),
            _ => String::new(),
        };
        let base = endpoint.base_url.trim_end_matches('/');
        let (auth, url, model, max_tokens_field) = match endpoint.provider {
            ModelProvider::AzureOpenAI => {
                let version = endpoint.api_version.as_deref().ok_or_else(|| SetupError::Endpoint {
                    name: connection.name.clone(),
                    what: "Azure OpenAI needs an API version (spec.azure.apiVersion)".into(),
                })?;
                let url =
                    format!("{base}/openai/deployments/{}/chat/completions?api-version={version}", endpoint.model);
                (vec![("api-key", key)], url, None, "max_completion_tokens")
            }
            provider => {
                let field = if provider == ModelProvider::OpenAI { "max_completion_tokens" } else { "max_tokens" };
                (bearer(&key), format!("{base}/chat/completions"), Some(endpoint.model.clone()), field)
            }
        };
        let http = Http::for_connection(connection, &auth)?;
        Ok(Self { http, url, model, parameters: connection.parameters.clone(), max_tokens_field })
    }

    /// The request body of one turn: the messages as they are (they are kept in this API's shape),
    /// the tools as functions, streaming with usage, and the Model's parameters.
    pub fn request(&self, messages: &[Message], tools: &[ToolSpec]) -> Value {
        let mut request = json!({
            "messages": messages,
            "stream": true,
            "stream_options": {"include_usage": true},
        });
        if let Some(model) = &self.model {
            request["model"] = json!(model);
        }
        if !tools.is_empty() {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
                .collect();
            request["tools"] = Value::Array(tools);
        }
        if let Some(temperature) = self.parameters.temperature {
            request["temperature"] = json!(temperature);
        }
        if let Some(max) = self.parameters.max_output_tokens {
            request[self.max_tokens_field] = json!(max);
        }
        if let Some(effort) = self.parameters.reasoning_effort {
            request["reasoning_effort"] = json!(effort_name(effort));
        }
        request
    }

    /// Streams one turn. Errors are classified as transient or fatal (see [`ModelError`]); an answer
    /// that ends before `[DONE]` or a finish reason is transient.
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<ModelTurn, ModelError> {
        let response = self.http.post_json(&self.url, &self.request(messages, tools), Default::default()).await?;
        let mut turn = ModelTurn::default();
        let mut calls: Vec<PartialCall> = Vec::new();
        let mut finished = false;
        read_events(&self.http, response, |event| {
            if event.data.trim() == "[DONE]" {
                finished = true;
                return Ok(Flow::Done);
            }
            let chunk: Chunk = serde_json::from_str(&event.data).map_err(|e| {
                let content: String = event.data.chars().take(200).collect();
                ModelError::fatal(format!(
                    "the model endpoint sent an answer that is not a chat completion ({e}): {content}"
                ))
            })?;
            if let Some(error) = chunk.error {
                let message = format!("the model's stream reported an error: {}", error.message);
                let kind = error.kind.unwrap_or_default();
                return Err(if transient_kind(&kind) {
                    ModelError::transient(message)
                } else {
                    ModelError::fatal(message)
                });
            }
            if let Some(usage) = chunk.usage {
                turn.usage = Some(TokenUsage {
                    prompt_tokens: usage.prompt_tokens,
                    completion_tokens: usage.completion_tokens,
                    total_tokens: usage.total_tokens,
                    cached_prompt_tokens: usage.prompt_tokens_details.and_then(|d| d.cached_tokens).unwrap_or(0),
                });
            }
            for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
                finished |= choice.finish_reason.is_some();
                read_delta(choice.delta, &mut turn, &mut calls, deltas);
            }
            Ok(Flow::Continue)
        })
        .await
        .map_err(|e| self.http.redacted(e))?;
        if !finished {
            return Err(ModelError::transient("the model's stream ended before the answer did"));
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

/// `Authorization: Bearer <key>`, or no header without a key.
fn bearer(key: &str) -> Vec<(&'static str, String)> {
    if key.is_empty() { Vec::new() } else { vec![("authorization", format!("Bearer {key}"))] }
}

/// `reasoning_effort` as OpenAI names its values.
fn effort_name(effort: ReasoningEffort) -> &'static str {
    match effort {
        ReasoningEffort::Minimal => "minimal",
        ReasoningEffort::Low => "low",
        ReasoningEffort::Medium => "medium",
        ReasoningEffort::High => "high",
    }
}

/// Adds one chunk's delta to the turn: text (streamed on), reasoning (streamed only), tool call parts.
fn read_delta(delta: Delta, turn: &mut ModelTurn, calls: &mut Vec<PartialCall>, deltas: &UnboundedSender<ModelDelta>) {
    if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
        turn.content.push_str(&text);
        let _ = deltas.send(ModelDelta::Content(text));
    }
    if let Some(text) = delta.reasoning_content.filter(|t| !t.is_empty()) {
        let _ = deltas.send(ModelDelta::Reasoning(text));
    }
    for part in delta.tool_calls.into_iter().flatten() {
        let at = match calls.iter().position(|c| c.index == part.index) {
            Some(at) => at,
            None => {
                calls.push(PartialCall { index: part.index, ..PartialCall::default() });
                calls.len() - 1
            }
        };
        let call = &mut calls[at];
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
    #[serde(default)]
    error: Option<StreamError>,
}

#[derive(Deserialize)]
struct StreamError {
    #[serde(default)]
    message: String,
    #[serde(default, rename = "type")]
    kind: Option<String>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: u32,
    #[serde(default)]
    delta: Delta,
    #[serde(default)]
    finish_reason: Option<String>,
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
    #[serde(default)]
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Deserialize)]
struct PromptTokensDetails {
    #[serde(default)]
    cached_tokens: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::model::Endpoint;

    fn connection(provider: ModelProvider, parameters: ModelParameters) -> Connection {
        Connection {
            caller_audience: None,
            name: "team-a".into(),
            endpoint: Endpoint {
                provider,
                base_url: "https://team-a.openai.azure.com/".into(),
                model: "chat".into(),
                api_version: Some("2024-10-21".into()),
                region: None,
            },
            credentials: Credentials::ApiKey("key".into()),
            headers: Vec::new(),
            ca_bundle: None,
            parameters,
            pricing: None,
        }
    }

    #[test]
    fn parameters_map_onto_each_flavours_fields() {
        let parameters = ModelParameters {
            temperature: Some(0.2),
            max_output_tokens: Some(900),
            reasoning_effort: Some(ReasoningEffort::Low),
        };
        let openai = OpenAiModel::connect(&connection(ModelProvider::OpenAI, parameters.clone())).expect("client");
        let body = openai.request(&[], &[]);
        assert_eq!((body["model"].clone(), body["max_completion_tokens"].clone()), (json!("chat"), json!(900)));
        assert_eq!((body["temperature"].clone(), body["reasoning_effort"].clone()), (json!(0.2), json!("low")));
        let compatible = OpenAiModel::connect(&connection(ModelProvider::OpenAICompatible, parameters.clone()));
        let body = compatible.expect("client").request(&[], &[]);
        assert_eq!((body["max_tokens"].clone(), body.get("max_completion_tokens")), (json!(900), None));
        let azure = OpenAiModel::connect(&connection(ModelProvider::AzureOpenAI, parameters)).expect("client");
        assert_eq!(
            azure.url,
            "https://team-a.openai.azure.com/openai/deployments/chat/chat/completions?api-version=2024-10-21"
        );
        let body = azure.request(&[], &[]);
        assert_eq!((body.get("model"), body["max_completion_tokens"].clone()), (None, json!(900)));
        let plain = OpenAiModel::connect(&connection(ModelProvider::OpenAI, ModelParameters::default()));
        let body = plain.expect("client").request(&[], &[]);
        for field in ["temperature", "max_completion_tokens", "max_tokens", "reasoning_effort", "tools"] {
            assert_eq!(body.get(field), None, "{field} is sent only when set");
        }
    }
}
