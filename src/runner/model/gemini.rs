//! Google's Gemini API, streamed: `POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`,
//! the key in `x-goog-api-key`.
//!
//! The conversation becomes `contents` of roles `user` and `model` ([`super::conversation`]), the
//! system prompt `systemInstruction`, tools `functionDeclarations` (their JSON Schema as
//! `parametersJsonSchema`, which takes JSON Schema as it is), tool calls `functionCall` parts and tool
//! results `functionResponse` parts (`{"output": ...}`, or `{"error": ...}` for a failed tool), named
//! by the function of the call they answer. Gemini sends a call's arguments whole, in one chunk.
//!
//! Gemini 3 models sign their function calls (`thoughtSignature`) and refuse a conversation whose calls
//! come back without their signature. The client keeps each call's signature by call id for as long as
//! it lives (a run), and sends it back with the call; a call it has none for (a resumed run's, before
//! this process) gets the placeholder Gemini documents for calls without one
//! ([`MISSING_SIGNATURE`]).
//!
//! Parameters go in `generationConfig`: `temperature`, `maxOutputTokens`, and `reasoningEffort` as
//! `thinkingConfig`: `thinkingBudget` for Gemini 2.x models (minimal 0, low 1024, medium 8192, high
//! 24576: the budgets Google's OpenAI compatibility layer maps these levels to), `thinkingLevel` for
//! later ones. Usage: `promptTokenCount` (cached tokens included) and `toolUsePromptTokenCount` are
//! prompt tokens, `candidatesTokenCount` and `thoughtsTokenCount` completion tokens,
//! `cachedContentTokenCount` the cached ones.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc::UnboundedSender;

use super::connection::{Connection, Credentials};
use super::conversation::{Block, Role, conversation};
use super::http::{Http, SetupError};
use super::sse::{Flow, read_events};
use super::turn::{ModelDelta, ModelError, ModelTurn};
use crate::resources::TokenUsage;
use crate::resources::model::{ModelParameters, ReasoningEffort};
use crate::run::message::{Message, ToolCall};
use crate::runner::tools::ToolSpec;

/// The `thoughtSignature` sent with a function call whose signature this client never saw: the value
/// Gemini's "Thought signatures" guide (FAQ) documents for calls without one.
pub const MISSING_SIGNATURE: &str = "skip_thought_signature_validator";

/// Finish reasons that mean the answer was withheld, not finished.
const BLOCKED: [&str; 6] = ["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY"];

/// One model of the Gemini API.
pub struct GeminiModel {
    http: Http,
    url: String,
    model: String,
    parameters: ModelParameters,
    /// The `thoughtSignature` of each function call this client received, by call id.
    signatures: Mutex<HashMap<String, String>>,
}

impl GeminiModel {
    /// A client for a `Gemini` Model: its endpoint, key, extra headers, CA bundle and parameters.
    /// Errors: those of [`Http::for_connection`].
    pub fn connect(connection: &Connection) -> Result<Self, SetupError> {
        let key = match &connection.credentials {
            Credentials::ApiKey(key) => key.clone(),
            _ => String::new(),
        };
        let model = connection.endpoint.model.trim_start_matches("models/").to_string();
        Ok(Self {
            http: Http::for_connection(connection, &[("x-goog-api-key", key)])?,
            url: format!(
                "{}/v1beta/models/{model}:streamGenerateContent?alt=sse",
                connection.endpoint.base_url.trim_end_matches('/')
            ),
            model,
            parameters: connection.parameters.clone(),
            signatures: Mutex::new(HashMap::new()),
        })
    }

    /// The request body of one turn.
    pub fn request(&self, messages: &[Message], tools: &[ToolSpec]) -> Value {
        let conversation = conversation(messages);
        let signatures = self.signatures.lock().map(|s| s.clone()).unwrap_or_default();
        let contents: Vec<Value> = conversation
            .turns
            .iter()
            .map(|(role, blocks)| {
                let mut signed = false;
                let parts: Vec<Value> = blocks
                    .iter()
                    .map(|block| match block {
                        Block::Text(text) => json!({"text": text}),
                        Block::Call { id, name, input } => {
                            let mut part = json!({"functionCall": {"name": name, "args": input}});
                            // Parallel calls carry one signature, on the first call.
                            match signatures.get(id) {
                                Some(signature) => part["thoughtSignature"] = json!(signature),
                                None if !signed => part["thoughtSignature"] = json!(MISSING_SIGNATURE),
                                None => {}
                            }
                            signed = true;
                            part
                        }
                        Block::Result { name, content, error, .. } => {
                            let key = if *error { "error" } else { "output" };
                            json!({"functionResponse": {"name": name, "response": {key: content}}})
                        }
                    })
                    .collect();
                json!({"role": if *role == Role::User { "user" } else { "model" }, "parts": parts})
            })
            .collect();
        let mut request = json!({"contents": contents});
        if !conversation.system.is_empty() {
            request["systemInstruction"] = json!({"parts": [{"text": conversation.system}]});
        }
        if !tools.is_empty() {
            let declarations: Vec<Value> = tools
                .iter()
                .map(|t| json!({"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}))
                .collect();
            request["tools"] = json!([{"functionDeclarations": declarations}]);
        }
        let mut config = serde_json::Map::new();
        if let Some(temperature) = self.parameters.temperature {
            config.insert("temperature".into(), json!(temperature));
        }
        if let Some(max) = self.parameters.max_output_tokens {
            config.insert("maxOutputTokens".into(), json!(max));
        }
        if let Some(effort) = self.parameters.reasoning_effort {
            config.insert("thinkingConfig".into(), thinking(&self.model, effort));
        }
        if !config.is_empty() {
            request["generationConfig"] = Value::Object(config);
        }
        request
    }

    /// Streams one turn. Errors are classified as transient or fatal (see [`ModelError`]); a stream
    /// that ends without a finish reason is transient, an answer withheld (safety, recitation) fatal.
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<ModelTurn, ModelError> {
        let response = self.http.post_json(&self.url, &self.request(messages, tools), Default::default()).await?;
        let mut turn = ModelTurn::default();
        let mut finish: Option<String> = None;
        let mut new_signatures = Vec::new();
        let prefix = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        read_events(&self.http, response, |event| {
            let chunk: Chunk = serde_json::from_str(&event.data).map_err(|e| {
                let content: String = event.data.chars().take(200).collect();
                ModelError::fatal(format!(
                    "the model endpoint sent an answer that is not a Gemini response ({e}): {content}"
                ))
            })?;
            if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
                return Err(ModelError::fatal(format!("Gemini refused the prompt ({reason})")));
            }
            if let Some(usage) = chunk.usage_metadata {
                let prompt = usage.prompt_token_count + usage.tool_use_prompt_token_count;
                let completion = usage.candidates_token_count + usage.thoughts_token_count;
                turn.usage = Some(TokenUsage {
                    prompt_tokens: prompt,
                    completion_tokens: completion,
                    total_tokens: prompt + completion,
                    cached_prompt_tokens: usage.cached_content_token_count,
                });
            }
            let Some(candidate) = chunk.candidates.into_iter().next() else { return Ok(Flow::Continue) };
            for part in candidate.content.map(|c| c.parts).unwrap_or_default() {
                if let Some(call) = part.function_call {
                    let id = call
                        .id
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(|| format!("call_{prefix}_{}", turn.tool_calls.len()));
                    if let Some(signature) = part.thought_signature {
                        new_signatures.push((id.clone(), signature));
                    }
                    let arguments = call.args.unwrap_or_else(|| json!({})).to_string();
                    turn.tool_calls.push(ToolCall::new(id, call.name, arguments));
                } else if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                    if part.thought {
                        let _ = deltas.send(ModelDelta::Reasoning(text));
                    } else {
                        turn.content.push_str(&text);
                        let _ = deltas.send(ModelDelta::Content(text));
                    }
                }
            }
            if candidate.finish_reason.is_some() {
                finish = candidate.finish_reason;
            }
            Ok(Flow::Continue)
        })
        .await
        .map_err(|e| self.http.redacted(e))?;
        if let Ok(mut signatures) = self.signatures.lock() {
            signatures.extend(new_signatures);
        }
        match finish.as_deref() {
            None => Err(ModelError::transient("the model's stream ended before the answer did")),
            Some("MALFORMED_FUNCTION_CALL") => Err(ModelError::transient("Gemini wrote a malformed function call")),
            Some(reason) if BLOCKED.contains(&reason) && turn.content.is_empty() && turn.tool_calls.is_empty() => {
                Err(ModelError::fatal(format!("Gemini withheld its answer ({reason})")))
            }
            Some(_) => Ok(turn),
        }
    }
}

/// `thinkingConfig` of a reasoning effort: a budget for Gemini 2.x models, a level for later ones.
fn thinking(model: &str, effort: ReasoningEffort) -> Value {
    if model.starts_with("gemini-2") {
        let budget = match effort {
            ReasoningEffort::Minimal => 0,
            ReasoningEffort::Low => 1024,
            ReasoningEffort::Medium => 8192,
            ReasoningEffort::High => 24576,
        };
        return json!({"thinkingBudget": budget});
    }
    let level = match effort {
        ReasoningEffort::Minimal => "minimal",
        ReasoningEffort::Low => "low",
        ReasoningEffort::Medium => "medium",
        ReasoningEffort::High => "high",
    };
    json!({"thinkingLevel": level})
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk {
    #[serde(default)]
    candidates: Vec<Candidate>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Vec<Part>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    thought: bool,
    #[serde(default)]
    thought_signature: Option<String>,
    #[serde(default)]
    function_call: Option<FunctionCall>,
}

#[derive(Deserialize)]
struct FunctionCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: i64,
    #[serde(default)]
    candidates_token_count: i64,
    #[serde(default)]
    thoughts_token_count: i64,
    #[serde(default)]
    tool_use_prompt_token_count: i64,
    #[serde(default)]
    cached_content_token_count: i64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasoning_effort_is_a_budget_for_gemini_2_and_a_level_after() {
        assert_eq!(thinking("gemini-2.5-flash", ReasoningEffort::Medium), json!({"thinkingBudget": 8192}));
        assert_eq!(thinking("gemini-2.5-pro", ReasoningEffort::Minimal), json!({"thinkingBudget": 0}));
        assert_eq!(thinking("gemini-3-pro-preview", ReasoningEffort::High), json!({"thinkingLevel": "high"}));
    }
}
