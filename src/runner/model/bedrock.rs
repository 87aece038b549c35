//! Amazon Bedrock's Converse API, streamed: `POST {base}/model/{modelId}/converse-stream`, the model id
//! percent-encoded as one path segment, signed with SigV4 (service `bedrock`, the Model's region) by
//! keys from [`super::aws`].
//!
//! The conversation becomes `messages` of roles `user` and `assistant` ([`super::conversation`]) with
//! `text`, `toolUse` and `toolResult` (`status: error` for a failed tool) blocks, the system prompt
//! `system`, tools `toolConfig.tools[].toolSpec` with their JSON Schema as `inputSchema.json`, and the
//! parameters `inferenceConfig` (`temperature`, `maxTokens`). `reasoningEffort` is not mapped: a
//! model's reasoning is set in model-specific `additionalModelRequestFields`, and Claude's must be sent
//! back with its signature in tool loops, which the conversation kept here cannot. No `cachePoint` is
//! sent (models without prompt caching refuse it).
//!
//! The answer is an AWS event stream (binary frames with CRCs, read by `aws-smithy-eventstream`) of
//! `messageStart`, `contentBlockStart` (a `toolUse`), `contentBlockDelta` (`text`, `toolUse.input` in
//! pieces, `reasoningContent.text` read as reasoning), `contentBlockStop`, `messageStop` and
//! `metadata` (usage), or an exception frame (`throttlingException`, `serviceUnavailableException`,
//! `modelStreamErrorException`... are transient; `validationException` is fatal). Usage: Bedrock's
//! `inputTokens` leaves out the tokens read from and written to the cache, so prompt tokens are
//! `inputTokens + cacheReadInputTokens + cacheWriteInputTokens`, and the cached ones
//! `cacheReadInputTokens`.

use std::time::SystemTime;

use aws_smithy_eventstream::frame::{DecodedFrame, MessageFrameDecoder};
use bytes::BytesMut;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::aws::{AwsCredentials, AwsEnvironment, sign};
use super::connection::Connection;
use super::conversation::{Block, Role, conversation};
use super::errors::transient_kind;
use super::http::{Http, SetupError, redact_error};
use super::turn::{ModelDelta, ModelError, ModelTurn};
use crate::resources::TokenUsage;
use crate::resources::model::ModelParameters;
use crate::run::message::{Message, ToolCall};
use crate::runner::tools::ToolSpec;

/// What a path segment keeps unencoded: RFC 3986's unreserved characters, as the AWS SDKs encode a
/// model id (`anthropic.claude-3-5-sonnet-20240620-v1:0` is sent with `%3A`).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// One model of Amazon Bedrock.
pub struct BedrockModel {
    http: Http,
    url: String,
    region: String,
    credentials: AwsCredentials,
    parameters: ModelParameters,
}

impl BedrockModel {
    /// A client for a `Bedrock` Model, its keys from its Secret or the runner's environment.
    /// Errors: those of [`Http::for_connection`], and [`SetupError::Endpoint`] without a region.
    pub fn connect(connection: &Connection) -> Result<Self, SetupError> {
        Self::connect_with(connection, AwsEnvironment::read(|name| std::env::var(name).ok()))
    }

    /// [`BedrockModel::connect`] with the environment's credential variables given.
    pub fn connect_with(connection: &Connection, environment: AwsEnvironment) -> Result<Self, SetupError> {
        let region = connection.endpoint.region.clone().ok_or_else(|| SetupError::Endpoint {
            name: connection.name.clone(),
            what: "Bedrock needs a region (spec.bedrock.region)".into(),
        })?;
        let http = Http::for_connection(connection, &[])?;
        let sts = Http::new(&connection.name, None, &[], &[], Vec::new())?;
        let model = utf8_percent_encode(&connection.endpoint.model, SEGMENT);
        Ok(Self {
            url: format!("{}/model/{model}/converse-stream", connection.endpoint.base_url.trim_end_matches('/')),
            credentials: AwsCredentials::new(&connection.credentials, environment, &region, sts.client()),
            http,
            region,
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
        let mut request = json!({"messages": messages});
        if !conversation.system.is_empty() {
            request["system"] = json!([{"text": conversation.system}]);
        }
        if !tools.is_empty() {
            let tools: Vec<Value> = tools
                .iter()
                .map(|t| json!({"toolSpec": {"name": t.name, "description": t.description, "inputSchema": {"json": t.parameters}}}))
                .collect();
            request["toolConfig"] = json!({"tools": tools});
        }
        let mut config = serde_json::Map::new();
        if let Some(max) = self.parameters.max_output_tokens {
            config.insert("maxTokens".into(), json!(max));
        }
        if let Some(temperature) = self.parameters.temperature {
            config.insert("temperature".into(), json!(temperature));
        }
        if !config.is_empty() {
            request["inferenceConfig"] = Value::Object(config);
        }
        request
    }

    /// Streams one turn. Errors are classified as transient or fatal (see [`ModelError`]); a stream
    /// that ends before `messageStop`, or whose frames fail their checksums, is transient.
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<ModelTurn, ModelError> {
        let body = super::http::json_body(&self.request(messages, tools))?;
        let keys = self.credentials.keys().await?;
        let content = [("content-type", "application/json"), ("accept", "application/vnd.amazon.eventstream")];
        let signed = sign(&keys, &self.region, "bedrock", "POST", &self.url, &content, &body, SystemTime::now())?;
        let mut headers = signed;
        for (name, value) in content {
            headers.insert(name, reqwest::header::HeaderValue::from_static(value));
        }
        let secrets = self.http.with_secrets(&[
            &keys.access_key_id,
            &keys.secret_access_key,
            keys.session_token.as_deref().unwrap_or_default(),
        ]);
        let redact = |e: ModelError| redact_error(e, &secrets);
        let mut response = self.http.post(&self.url, body, headers).await.map_err(redact)?;
        let mut stream = Stream::default();
        let mut buffer = BytesMut::new();
        let mut decoder = MessageFrameDecoder::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| redact(self.http.broken(e)))? {
            buffer.extend_from_slice(&chunk);
            loop {
                match decoder.decode_frame(&mut buffer) {
                    Ok(DecodedFrame::Complete(frame)) => stream.read(&frame, deltas).map_err(redact)?,
                    Ok(DecodedFrame::Incomplete) => break,
                    Err(e) => return Err(ModelError::transient(format!("the model's event stream is corrupt: {e}"))),
                }
            }
        }
        if !stream.stopped {
            return Err(ModelError::transient("the model's stream ended before the answer did"));
        }
        Ok(stream.turn())
    }
}

/// A block as Converse shapes it.
fn block(block: &Block) -> Value {
    match block {
        Block::Text(text) => json!({"text": text}),
        Block::Call { id, name, input } => json!({"toolUse": {"toolUseId": id, "name": name, "input": input}}),
        Block::Result { id, content, error, .. } => json!({"toolResult": {
            "toolUseId": id,
            "content": [{"text": content}],
            "status": if *error { "error" } else { "success" },
        }}),
    }
}

/// What the stream has said so far.
#[derive(Default)]
struct Stream {
    content: String,
    /// Tool calls by content block index: (index, id, name, input).
    calls: Vec<(u64, String, String, String)>,
    usage: Option<TokenUsage>,
    stopped: bool,
}

impl Stream {
    /// Reads one frame: an event by its `:event-type`, or an exception or error.
    fn read(
        &mut self,
        frame: &aws_smithy_types::event_stream::Message,
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<(), ModelError> {
        let header = |name: &str| {
            frame
                .headers()
                .iter()
                .find(|h| h.name().as_str() == name)
                .and_then(|h| h.value().as_string().ok())
                .map(|v| v.as_str().to_string())
        };
        let payload: Value = serde_json::from_slice(frame.payload()).unwrap_or(Value::Null);
        match header(":message-type").as_deref() {
            Some("exception") => {
                let kind = header(":exception-type").unwrap_or_default();
                let message = format!(
                    "the model's stream reported {kind}: {}",
                    payload["message"].as_str().or(payload["Message"].as_str()).unwrap_or_default()
                );
                return Err(if transient_kind(&kind) {
                    ModelError::transient(message)
                } else {
                    ModelError::fatal(message)
                });
            }
            Some("error") => {
                let code = header(":error-code").unwrap_or_default();
                let message =
                    format!("the model's stream reported {code}: {}", header(":error-message").unwrap_or_default());
                return Err(if transient_kind(&code) {
                    ModelError::transient(message)
                } else {
                    ModelError::fatal(message)
                });
            }
            _ => {}
        }
        let index = payload["contentBlockIndex"].as_u64().unwrap_or_default();
        match header(":event-type").as_deref() {
            Some("contentBlockStart") => {
                let tool = &payload["start"]["toolUse"];
                if tool.is_object() {
                    let text = |key: &str| tool[key].as_str().unwrap_or_default().to_string();
                    self.calls.push((index, text("toolUseId"), text("name"), String::new()));
                }
            }
            Some("contentBlockDelta") => {
                let delta = &payload["delta"];
                if let Some(text) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                    self.content.push_str(text);
                    let _ = deltas.send(ModelDelta::Content(text.to_string()));
                } else if let Some(input) = delta["toolUse"]["input"].as_str() {
                    if let Some(call) = self.calls.iter_mut().find(|c| c.0 == index) {
                        call.3.push_str(input);
                    }
                } else if let Some(text) = delta["reasoningContent"]["text"].as_str().filter(|t| !t.is_empty()) {
                    let _ = deltas.send(ModelDelta::Reasoning(text.to_string()));
                }
            }
            Some("messageStop") => self.stopped = true,
            Some("metadata") => {
                let usage = &payload["usage"];
                let count = |key: &str| usage[key].as_i64().unwrap_or_default();
                let prompt = count("inputTokens") + count("cacheReadInputTokens") + count("cacheWriteInputTokens");
                self.usage = Some(TokenUsage {
                    prompt_tokens: prompt,
                    completion_tokens: count("outputTokens"),
                    total_tokens: prompt + count("outputTokens"),
                    cached_prompt_tokens: count("cacheReadInputTokens"),
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// The whole turn.
    fn turn(self) -> ModelTurn {
        ModelTurn {
            content: self.content,
            tool_calls: self
                .calls
                .into_iter()
                .map(|(_, id, name, input)| {
                    ToolCall::new(id, name, if input.trim().is_empty() { "{}".to_string() } else { input })
                })
                .collect(),
            usage: self.usage,
        }
    }
}
