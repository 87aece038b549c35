//! Anthropic's Messages API (`POST {base}/v1/messages`), streamed, with tool use and prompt caching.
//!
//! Requests carry `x-api-key`, `anthropic-version: 2023-06-01` and `content-type: application/json`.
//! The conversation is shaped as the API wants it ([`super::conversation`]): the system prompt as the
//! top-level `system`, tool calls as `tool_use` blocks, tool results as `tool_result` blocks of a user
//! turn, turns of one role merged. `max_tokens`, which the API requires, is the Model's
//! `maxOutputTokens` or [`DEFAULT_MAX_TOKENS`]; `temperature` is sent up to 1, the API's ceiling.
//!
//! Prompt caching: the system prompt and the last tool carry `cache_control: {type: "ephemeral"}`, so
//! the prefix that every turn of a run repeats (tools, then system) is read from the cache after the
//! first turn; caching is generally available and needs no beta header.
//!
//! `reasoningEffort` is not mapped: extended thinking requires every thinking block, with its
//! signature, to be sent back unchanged while a tool loop runs, and the conversation kept here has no
//! place for them; a Model that sets it gets answers without extended thinking.
//!
//! The stream's events (Anthropic's "Streaming Messages"): `message_start` (input usage),
//! `content_block_start`, `content_block_delta` (`text_delta`, `input_json_delta` for a tool's
//! arguments, `thinking_delta` read as reasoning), `content_block_stop`, `message_delta` (stop reason,
//! output usage), `message_stop`, `ping`, and `error` (an `overloaded_error` is transient).

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::connection::{Connection, Credentials};
use super::conversation::{Block, Role, conversation};
use super::errors::transient_kind;
use super::http::{Http, SetupError};
use super::sse::{Flow, read_events};
use super::turn::{ModelDelta, ModelError, ModelTurn};
use crate::resources::TokenUsage;
use crate::resources::model::ModelParameters;
use crate::run::message::{Message, ToolCall};
use crate::runner::tools::ToolSpec;

/// The API version every request names (`anthropic-version`).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` when the Model sets no `maxOutputTokens`: the API requires one.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// One model of Anthropic's API.
pub struct AnthropicModel {
    http: Http,
    url: String,
    model: String,
    parameters: ModelParameters,
}

impl AnthropicModel {
    /// A client for an `Anthropic` Model: its endpoint, key, extra headers, CA bundle and parameters.
    /// Errors: those of [`Http::for_connection`].
    pub fn connect(connection: &Connection) -> Result<Self, SetupError> {
        let key = match &connection.credentials {
            Credentials::ApiKey(key) => key.clone(),
            _ => String::new(),
        };
        Ok(Self {
            http: Http::for_connection(connection, &[("x-api-key", key)])?,
            url: format!("{}/v1/messages", connection.endpoint.base_url.trim_end_matches('/')),
            model: connection.endpoint.model.clone(),
            parameters: connection.parameters.clone(),
        })
    }

    /// The request body of one turn.
    pub fn request(&self, messages: &[Message], tools: &[ToolSpec]) -> Value {
        let conversation = conversation(messages);
        let messages: Vec<Value> = conversation
            .turns
            .iter()
            .map(|(role, blocks)| {
                let role = if *role == Role::User { "user" } else { "assistant" };
                json!({"role": role, "content": blocks.iter().map(block).collect::<Vec<_>>()})
            })
            .collect();
        let mut request = json!({
            "model": self.model,
            "max_tokens": self.parameters.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
            "messages": messages,
            "stream": true,
        });
        if !conversation.system.is_empty() {
            request["system"] =
                json!([{"type": "text", "text": conversation.system, "cache_control": {"type": "ephemeral"}}]);
        }
        if !tools.is_empty() {
            let mut tools: Vec<Value> = tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
                .collect();
            if let Some(last) = tools.last_mut() {
                last["cache_control"] = json!({"type": "ephemeral"});
            }
            request["tools"] = Value::Array(tools);
        }
        if let Some(temperature) = self.parameters.temperature {
            request["temperature"] = json!(temperature.min(1.0));
        }
        request
    }

    /// Streams one turn. Errors are classified as transient or fatal (see [`ModelError`]); a stream
    /// that ends before `message_stop` is transient.
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<ModelTurn, ModelError> {
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("anthropic-version", reqwest::header::HeaderValue::from_static(ANTHROPIC_VERSION));
        let response = self.http.post_json(&self.url, &self.request(messages, tools), headers).await?;
        let mut state = Stream::default();
        read_events(&self.http, response, |event| state.read(&event.data, deltas))
            .await
            .map_err(|e| self.http.redacted(e))?;
        if !state.stopped {
            return Err(ModelError::transient("the model's stream ended before the answer did"));
        }
        Ok(state.turn())
    }
}

/// A block as the Messages API shapes it.
fn block(block: &Block) -> Value {
    match block {
        Block::Text(text) => json!({"type": "text", "text": text}),
        Block::Call { id, name, input } => json!({"type": "tool_use", "id": id, "name": name, "input": input}),
        Block::Result { id, content, error, .. } => {
            json!({"type": "tool_result", "tool_use_id": id, "content": content, "is_error": error})
        }
    }
}

/// What the stream has said so far.
#[derive(Default)]
struct Stream {
    content: String,
    /// Tool calls by content block index: (index, id, name, arguments).
    calls: Vec<(u32, String, String, String)>,
    usage: Usage,
    stopped: bool,
}

impl Stream {
    /// Reads one event's data.
    fn read(&mut self, data: &str, deltas: &UnboundedSender<ModelDelta>) -> Result<Flow, ModelError> {
        let event: Event = serde_json::from_str(data).map_err(|e| {
            let content: String = data.chars().take(200).collect();
            ModelError::fatal(format!("the model endpoint sent an event that is not a Messages event ({e}): {content}"))
        })?;
        match event {
            Event::MessageStart { message } => self.usage.add(message.usage),
            Event::ContentBlockStart { index, content_block } => {
                if content_block["type"] == "tool_use" {
                    let text = |key: &str| content_block[key].as_str().unwrap_or_default().to_string();
                    self.calls.push((index, text("id"), text("name"), String::new()));
                } else if let Some(text) = content_block["text"].as_str().filter(|t| !t.is_empty()) {
                    self.content.push_str(text);
                    let _ = deltas.send(ModelDelta::Content(text.to_string()));
                }
            }
            Event::ContentBlockDelta { index, delta } => match delta["type"].as_str() {
                Some("text_delta") => {
                    let text = delta["text"].as_str().unwrap_or_default();
                    if !text.is_empty() {
                        self.content.push_str(text);
                        let _ = deltas.send(ModelDelta::Content(text.to_string()));
                    }
                }
                Some("input_json_delta") => {
                    if let Some(call) = self.calls.iter_mut().find(|c| c.0 == index) {
                        call.3.push_str(delta["partial_json"].as_str().unwrap_or_default());
                    }
                }
                Some("thinking_delta") => {
                    let text = delta["thinking"].as_str().unwrap_or_default();
                    if !text.is_empty() {
                        let _ = deltas.send(ModelDelta::Reasoning(text.to_string()));
                    }
                }
                _ => {}
            },
            Event::MessageDelta { usage } => self.usage.add(usage),
            Event::MessageStop {} => {
                self.stopped = true;
                return Ok(Flow::Done);
            }
            Event::Error { error } => {
                let kind = error["type"].as_str().unwrap_or_default();
                let message = format!(
                    "the model's stream reported an error ({kind}): {}",
                    error["message"].as_str().unwrap_or_default()
                );
                return Err(if transient_kind(kind) {
                    ModelError::transient(message)
                } else {
                    ModelError::fatal(message)
                });
            }
            Event::ContentBlockStop {} | Event::Ping {} | Event::Other => {}
        }
        Ok(Flow::Continue)
    }

    /// The whole turn.
    fn turn(self) -> ModelTurn {
        let usage = &self.usage;
        let prompt = usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens;
        ModelTurn {
            content: self.content,
            tool_calls: self
                .calls
                .into_iter()
                .map(|(_, id, name, arguments)| {
                    ToolCall::new(id, name, if arguments.trim().is_empty() { "{}".to_string() } else { arguments })
                })
                .collect(),
            usage: Some(TokenUsage {
                prompt_tokens: prompt,
                completion_tokens: usage.output_tokens,
                total_tokens: prompt + usage.output_tokens,
                cached_prompt_tokens: usage.cache_read_input_tokens,
            }),
        }
    }
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Event {
    MessageStart {
        message: StartMessage,
    },
    ContentBlockStart {
        index: u32,
        content_block: Value,
    },
    ContentBlockDelta {
        index: u32,
        delta: Value,
    },
    ContentBlockStop {},
    MessageDelta {
        #[serde(default)]
        usage: UsagePart,
    },
    MessageStop {},
    Ping {},
    Error {
        error: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    usage: UsagePart,
}

/// Usage as `message_start` and `message_delta` report it: each field, when present, is the count so far.
#[derive(Default, Deserialize)]
struct UsagePart {
    input_tokens: Option<i64>,
    output_tokens: Option<i64>,
    cache_creation_input_tokens: Option<i64>,
    cache_read_input_tokens: Option<i64>,
}

#[derive(Default)]
struct Usage {
    input_tokens: i64,
    output_tokens: i64,
    cache_creation_input_tokens: i64,
    cache_read_input_tokens: i64,
}

impl Usage {
    fn add(&mut self, part: UsagePart) {
        let take = |field: &mut i64, value: Option<i64>| {
            if let Some(value) = value {
                *field = value;
            }
        };
        take(&mut self.input_tokens, part.input_tokens);
        take(&mut self.output_tokens, part.output_tokens);
        take(&mut self.cache_creation_input_tokens, part.cache_creation_input_tokens);
        take(&mut self.cache_read_input_tokens, part.cache_read_input_tokens);
    }
}
