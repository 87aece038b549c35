//! Chat messages as OpenAI's chat-completions API shapes them; the same JSON is sent to the model,
//! stored as the thread's history, and returned by the facade.

use serde::{Deserialize, Serialize};

use super::status::RunStatus;

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    /// Instructions for the model.
    System {
        /// The prompt.
        content: String,
    },
    /// What the user (or the delegating parent) asked.
    User {
        /// The text.
        content: String,
    },
    /// A model turn: text, tool calls, or both.
    Assistant {
        /// The text; absent when the turn only calls tools.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        /// The tools the model asked to call.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// The id of the call this answers.
        tool_call_id: String,
        /// The tool's output, or its error.
        content: String,
    },
}

/// A tool call requested by the model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct ToolCall {
    /// The call's id, echoed in the tool message that answers it.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type", default = "function_kind")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

/// The function a tool call names, with its arguments as the model wrote them (a JSON text, not yet
/// parsed: a model may write invalid JSON, which the tool reports back).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct FunctionCall {
    /// The tool name.
    pub name: String,
    /// The arguments, as JSON text.
    #[serde(default)]
    pub arguments: String,
}

fn function_kind() -> String {
    "function".to_string()
}

impl ToolCall {
    /// A function tool call.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            kind: function_kind(),
            function: FunctionCall { name: name.into(), arguments: arguments.into() },
        }
    }
}

impl Message {
    /// The text of a message, if it has any.
    pub fn text(&self) -> Option<&str> {
        match self {
            Message::System { content } | Message::User { content } | Message::Tool { content, .. } => Some(content),
            Message::Assistant { content, .. } => content.as_deref(),
        }
    }
}

/// Answers each call of the last assistant turn of `messages` that no tool message answers, as not
/// run: a run that ended (`status`) in the middle of a turn leaves a valid conversation (chat APIs
/// refuse a tool call without its result).
pub fn answer_open_calls(messages: &mut Vec<Message>, status: RunStatus) {
    let Some(at) = messages.iter().rposition(|m| matches!(m, Message::Assistant { .. })) else { return };
    let Message::Assistant { tool_calls, .. } = &messages[at] else { unreachable!("found above") };
    let answered: Vec<&str> = messages[at + 1..]
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let open: Vec<String> =
        tool_calls.iter().map(|c| c.id.clone()).filter(|id| !answered.contains(&id.as_str())).collect();
    for id in open {
        let content = format!("Error: the run ended ({}) before this tool call finished", status.as_str());
        messages.push(Message::Tool { tool_call_id: id, content });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_of_the_last_turn_left_open_are_answered_as_not_run() {
        let mut messages = vec![
            Message::User { content: "go".into() },
            Message::Assistant {
                content: None,
                tool_calls: vec![ToolCall::new("a", "ls", "{}"), ToolCall::new("b", "write_file", "{}")],
            },
            Message::Tool { tool_call_id: "a".into(), content: "x".into() },
        ];
        answer_open_calls(&mut messages, RunStatus::Cancelled);
        assert_eq!(
            messages.last(),
            Some(&Message::Tool {
                tool_call_id: "b".into(),
                content: "Error: the run ended (cancelled) before this tool call finished".into()
            })
        );
        let before = messages.clone();
        answer_open_calls(&mut messages, RunStatus::Cancelled);
        assert_eq!(messages, before, "nothing left open");
    }
}
