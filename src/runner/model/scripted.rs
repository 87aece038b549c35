//! The `scripted` provider: deterministic, offline model turns.
//!
//! - `scripted/echo` answers the last user message verbatim.
//! - `scripted/file:<path>` replays a YAML list of turns, one per model call. Each turn may have
//!   `delay_ms` (wait before answering), `content` (the text) and `tool_calls` (a list of
//!   `{name, arguments}`, `arguments` any YAML value, sent to the tool as JSON; a string is sent as it is,
//!   so a script can also send arguments that are not JSON). When the script runs out, the last turn's
//!   text is the answer.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use super::{ModelDelta, ModelError, ModelTurn};
use crate::runner::message::{Message, ToolCall};

/// One scripted assistant turn.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptTurn {
    /// Milliseconds to wait before the turn is answered.
    #[serde(default)]
    pub delay_ms: u64,
    /// The turn's text.
    #[serde(default)]
    pub content: Option<String>,
    /// The tools the turn calls.
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
}

/// One scripted tool call.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    /// The tool to call.
    pub name: String,
    /// Its arguments: a YAML value sent as JSON, or a string sent verbatim.
    #[serde(default)]
    pub arguments: Value,
}

/// A scripted model; it counts its calls, so one instance serves one run.
pub struct ScriptedModel {
    script: Option<Vec<ScriptTurn>>,
    calls: AtomicUsize,
}

impl ScriptedModel {
    /// `echo` or `file:<path>`. Errors: an unknown name, an unreadable or malformed script file.
    pub fn from_name(name: &str) -> Result<Self, String> {
        if name == "echo" {
            return Ok(Self { script: None, calls: AtomicUsize::new(0) });
        }
        let Some(path) = name.strip_prefix("file:") else {
            return Err(format!("scripted model {name:?} is unknown (scripted/echo or scripted/file:<path>)"));
        };
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read the model script {path}: {e}"))?;
        Self::from_script(&text).map_err(|e| format!("the model script {path} is not a list of turns: {e}"))
    }

    /// A model that replays the YAML list of turns `yaml`.
    pub fn from_script(yaml: &str) -> Result<Self, String> {
        let turns: Vec<ScriptTurn> = serde_norway::from_str(yaml).map_err(|e| e.to_string())?;
        if turns.is_empty() {
            return Err("the script has no turns".to_string());
        }
        Ok(Self { script: Some(turns), calls: AtomicUsize::new(0) })
    }

    /// Answers the next turn.
    pub async fn complete(
        &self,
        messages: &[Message],
        deltas: &UnboundedSender<ModelDelta>,
    ) -> Result<ModelTurn, ModelError> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let Some(script) = &self.script else {
            let last_user = messages.iter().rev().find_map(|m| match m {
                Message::User { content } => Some(content.clone()),
                _ => None,
            });
            let content = last_user.unwrap_or_default();
            let _ = deltas.send(ModelDelta::Content(content.clone()));
            return Ok(ModelTurn { content, ..ModelTurn::default() });
        };
        let (turn, exhausted) = match script.get(call) {
            Some(turn) => (turn, false),
            None => (script.last().expect("a script has turns"), true),
        };
        if turn.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(turn.delay_ms)).await;
        }
        let content = turn.content.clone().unwrap_or_default();
        if !content.is_empty() {
            let _ = deltas.send(ModelDelta::Content(content.clone()));
        }
        let tool_calls = if exhausted {
            Vec::new()
        } else {
            turn.tool_calls
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let arguments = match &c.arguments {
                        Value::String(text) => text.clone(),
                        Value::Null => "{}".to_string(),
                        other => other.to_string(),
                    };
                    ToolCall::new(format!("call_{call}_{i}"), &c.name, arguments)
                })
                .collect()
        };
        Ok(ModelTurn { content, tool_calls, usage: None })
    }
}
