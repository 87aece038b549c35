//! A run tree's timeline, from the runs' own records: the spans `GET /api/agent/runs/{run_id}/trace`
//! answers and the console draws, without any tracing backend. One span per run (from its creation to
//! its `end` event), per model call (the runner's `model_call` event, [`ModelCallEvent`]) and per tool
//! call (its `tool_call` event to its `tool_result`); a child run goes under the tool call that started
//! it (the parent's `subagent_run` event), or under its parent's run when no tool call names it. The
//! names and attributes are those of the exported spans (OpenTelemetry's GenAI conventions:
//! `invoke_agent <agent>`, `chat <model>`, `execute_tool <tool>`), so both tell the same story.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::event::{EventKind, StoredEvent};
use super::record::RunRecord;

/// The `type` of the `custom` event a runner writes after each model call (each attempt).
pub const MODEL_CALL_EVENT: &str = "model_call";

/// The payload of a `model_call` event: one model call, as its span says it. No content.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelCallEvent {
    /// Always [`MODEL_CALL_EVENT`].
    #[serde(rename = "type")]
    pub kind: String,
    /// When the call was sent, RFC 3339.
    pub started_at: String,
    /// How long it took to its last token or its error, in milliseconds.
    pub duration_ms: u64,
    /// From the request to the first streamed token, in milliseconds; `null` when nothing streamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_to_first_token_ms: Option<u64>,
    /// The model's id at its provider.
    pub model: String,
    /// The provider (`openai`, `anthropic`, `gemini`, `azure`, `bedrock`, `scripted`...).
    pub provider: String,
    /// Tokens of the prompt.
    #[serde(default)]
    pub input_tokens: i64,
    /// Tokens written.
    #[serde(default)]
    pub output_tokens: i64,
    /// Tokens of the prompt read from the provider's cache.
    #[serde(default)]
    pub cached_tokens: i64,
    /// What it cost, `"<amount> <currency>"`, when the Model states a price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<String>,
    /// `stop` or `tool_calls`; `null` for a failed call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// `transient` or `fatal` for a failed call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What a span stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    /// A run of an agent.
    Run,
    /// A model call.
    Chat,
    /// A tool call.
    Tool,
}

/// One span of a run tree's timeline.
#[derive(Clone, Debug, PartialEq, Serialize, utoipa::ToSchema)]
pub struct TimelineSpan {
    /// The span's id within the timeline: the run id, `<run>/chat/<n>` or `<run>/tool/<call id>`.
    pub span_id: String,
    /// The span it is part of; `null` for the tree's root.
    pub parent_span_id: Option<String>,
    /// The run it belongs to.
    pub run_id: String,
    /// What it stands for.
    pub kind: SpanKind,
    /// `invoke_agent <agent>`, `chat <model>` or `execute_tool <tool>`, as the exported span is named.
    pub name: String,
    /// When it started, RFC 3339.
    pub start: String,
    /// When it ended, RFC 3339; `null` while it goes on.
    pub end: Option<String>,
    /// How long it took, in milliseconds; `null` while it goes on.
    pub duration_ms: Option<u64>,
    /// `ok`, `error`, or `running`; for a run, its status.
    pub status: String,
    /// The attributes the exported span carries (`gen_ai.*`, `yuxi.*`): tokens, cost, tool, run.
    #[schema(value_type = Object)]
    pub attributes: Map<String, Value>,
}

/// The spans of one run: its own span (under `parent`), its model calls and its tool calls, in the
/// order they started; and where each child it started goes (`child run id → span id`).
pub fn run_spans(
    record: &RunRecord,
    events: &[StoredEvent],
    parent: Option<String>,
) -> (Vec<TimelineSpan>, HashMap<String, String>) {
    let run_id = &record.run_id;
    let mut spans = Vec::new();
    let mut children = HashMap::new();
    let mut open_tools: HashMap<String, usize> = HashMap::new();
    let mut end: Option<(String, String)> = None;
    let mut chats = 0;
    for stored in events {
        let envelope = &stored.envelope;
        let payload = &envelope.payload;
        let kind = payload.get("type").and_then(Value::as_str).unwrap_or_default();
        match (envelope.event, kind) {
            (EventKind::Custom, MODEL_CALL_EVENT) => {
                let Ok(call) = serde_json::from_value::<ModelCallEvent>(payload.clone()) else { continue };
                chats += 1;
                spans.push(chat_span(run_id, chats, &call));
            }
            (EventKind::Messages, "tool_call") => {
                let Some(id) = payload.get("tool_call_id").and_then(Value::as_str) else { continue };
                let name = payload.get("name").and_then(Value::as_str).unwrap_or_default();
                let mut attributes = Map::new();
                attributes.insert("gen_ai.operation.name".into(), json!("execute_tool"));
                attributes.insert("gen_ai.tool.name".into(), json!(name));
                attributes.insert("gen_ai.tool.call.id".into(), json!(id));
                open_tools.insert(id.to_string(), spans.len());
                spans.push(TimelineSpan {
                    span_id: format!("{run_id}/tool/{id}"),
                    parent_span_id: Some(run_id.clone()),
                    run_id: run_id.clone(),
                    kind: SpanKind::Tool,
                    name: format!("execute_tool {name}"),
                    start: envelope.created_at.clone(),
                    end: None,
                    duration_ms: None,
                    status: "running".into(),
                    attributes,
                });
            }
            (EventKind::Messages, "tool_result") => {
                let Some(id) = payload.get("tool_call_id").and_then(Value::as_str) else { continue };
                let Some(&at) = open_tools.get(id) else { continue };
                let span = &mut spans[at];
                let failed = payload.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                span.status = if failed { "error" } else { "ok" }.into();
                close(span, &envelope.created_at);
                let bytes = payload.get("content").and_then(Value::as_str).map_or(0, str::len);
                span.attributes.insert("yuxi.tool.result_bytes".into(), json!(bytes));
                // The call that started the child, not a later one that waited for it.
                if let Some(child) = payload.get("child_run_id").and_then(Value::as_str) {
                    children.entry(child.to_string()).or_insert_with(|| span.span_id.clone());
                }
            }
            (EventKind::Custom, "subagent_run") => {
                let child = payload.get("run_id").and_then(Value::as_str);
                let call = payload.get("tool_call_id").and_then(Value::as_str);
                if let (Some(child), Some(call)) = (child, call) {
                    children.entry(child.to_string()).or_insert_with(|| format!("{run_id}/tool/{call}"));
                }
            }
            (EventKind::End, _) => {
                let status = payload.get("status").and_then(Value::as_str).unwrap_or("ended");
                end = Some((envelope.created_at.clone(), status.to_string()));
            }
            _ => {}
        }
    }
    let mut attributes = Map::new();
    attributes.insert("gen_ai.operation.name".into(), json!("invoke_agent"));
    attributes.insert("gen_ai.agent.name".into(), json!(record.agent_slug));
    attributes.insert("yuxi.run.id".into(), json!(run_id));
    attributes.insert("yuxi.thread.id".into(), json!(record.thread_id));
    let (input, output) = spans.iter().filter(|s| s.kind == SpanKind::Chat).fold((0, 0), |(i, o), s| {
        let count = |key: &str| s.attributes.get(key).and_then(Value::as_i64).unwrap_or(0);
        (i + count("gen_ai.usage.input_tokens"), o + count("gen_ai.usage.output_tokens"))
    });
    attributes.insert("gen_ai.usage.input_tokens".into(), json!(input));
    attributes.insert("gen_ai.usage.output_tokens".into(), json!(output));
    let mut run = TimelineSpan {
        span_id: run_id.clone(),
        parent_span_id: parent,
        run_id: run_id.clone(),
        kind: SpanKind::Run,
        name: format!("invoke_agent {}", record.agent_slug),
        start: record.created_at.clone(),
        end: None,
        duration_ms: None,
        status: record.status.to_string(),
        attributes,
    };
    if let Some((at, status)) = end {
        run.status = status;
        close(&mut run, &at);
    }
    spans.insert(0, run);
    (spans, children)
}

/// The span of the `n`th model call of `run_id`.
fn chat_span(run_id: &str, n: usize, call: &ModelCallEvent) -> TimelineSpan {
    let mut attributes = Map::new();
    attributes.insert("gen_ai.operation.name".into(), json!("chat"));
    attributes.insert("gen_ai.provider.name".into(), json!(call.provider));
    attributes.insert("gen_ai.request.model".into(), json!(call.model));
    attributes.insert("gen_ai.usage.input_tokens".into(), json!(call.input_tokens));
    attributes.insert("gen_ai.usage.output_tokens".into(), json!(call.output_tokens));
    attributes.insert("gen_ai.usage.cache_read.input_tokens".into(), json!(call.cached_tokens));
    if let Some(reason) = &call.finish_reason {
        attributes.insert("gen_ai.response.finish_reasons".into(), json!(reason));
    }
    if let Some(cost) = &call.cost {
        attributes.insert("yuxi.cost".into(), json!(cost));
    }
    if let Some(ttft) = call.time_to_first_token_ms {
        attributes.insert("yuxi.time_to_first_token_ms".into(), json!(ttft));
    }
    if let Some(error) = &call.error {
        attributes.insert("error.type".into(), json!(error));
    }
    let end = call
        .started_at
        .parse::<jiff::Timestamp>()
        .ok()
        .and_then(|t| t.checked_add(jiff::SignedDuration::from_millis(call.duration_ms as i64)).ok())
        .map(|t| t.to_string());
    TimelineSpan {
        span_id: format!("{run_id}/chat/{n}"),
        parent_span_id: Some(run_id.to_string()),
        run_id: run_id.to_string(),
        kind: SpanKind::Chat,
        name: format!("chat {}", call.model),
        start: call.started_at.clone(),
        end,
        duration_ms: Some(call.duration_ms),
        status: if call.error.is_some() { "error" } else { "ok" }.into(),
        attributes,
    }
}

/// Ends `span` at `at` (RFC 3339), with its duration when both times parse.
fn close(span: &mut TimelineSpan, at: &str) {
    let start = span.start.parse::<jiff::Timestamp>().ok();
    let end = at.parse::<jiff::Timestamp>().ok();
    span.duration_ms = match (start, end) {
        (Some(start), Some(end)) => Some(end.duration_since(start).as_millis().max(0) as u64),
        _ => None,
    };
    span.end = Some(at.to_string());
}

#[cfg(test)]
mod tests;
