//! A conversation as the APIs that are not OpenAI's shape it (Anthropic's Messages, Gemini's contents,
//! Bedrock's Converse): the system prompt apart, two roles that alternate, and tool calls and results
//! as blocks of those turns. Each of those clients renders these turns into its own JSON.

use serde_json::{Map, Value};

use crate::run::message::Message;

/// Who speaks a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The user, and the tool results sent back to the model.
    User,
    /// The model.
    Assistant,
}

/// One block of a turn.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    /// Text (never blank: those APIs refuse blank text blocks).
    Text(String),
    /// A tool call of the model, its arguments read as a JSON object (`{}` when the model wrote
    /// something else, which its tool was told).
    Call {
        /// The call's id.
        id: String,
        /// The tool.
        name: String,
        /// The arguments.
        input: Value,
    },
    /// A tool's result.
    Result {
        /// The id of the call it answers.
        id: String,
        /// The tool of that call (Gemini names results by function), `unknown` if no call has the id.
        name: String,
        /// The tool's output, or its error.
        content: String,
        /// Whether the tool failed (its output starts `Error:`, as the graph writes failures).
        error: bool,
    },
}

/// A conversation: the system prompt and the turns, alternating, none empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversation {
    /// The system messages' text, joined by blank lines; empty when there is none.
    pub system: String,
    /// The turns, a role never twice in a row.
    pub turns: Vec<(Role, Vec<Block>)>,
}

/// Reads `messages` into a [`Conversation`]: system messages into the system prompt, each message's
/// text and calls into blocks, tool results into user turns, and consecutive turns of one role merged.
pub fn conversation(messages: &[Message]) -> Conversation {
    let mut out = Conversation::default();
    let mut names: Vec<(String, String)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message {
            Message::System { content } => {
                if !content.trim().is_empty() {
                    if !out.system.is_empty() {
                        out.system.push_str("\n\n");
                    }
                    out.system.push_str(content);
                }
                continue;
            }
            Message::User { content } => (Role::User, text(content)),
            Message::Assistant { content, tool_calls } => {
                let mut blocks = text(content.as_deref().unwrap_or_default());
                for call in tool_calls {
                    names.push((call.id.clone(), call.function.name.clone()));
                    let input = match serde_json::from_str::<Value>(&call.function.arguments) {
                        Ok(Value::Object(object)) => Value::Object(object),
                        _ => Value::Object(Map::new()),
                    };
                    blocks.push(Block::Call { id: call.id.clone(), name: call.function.name.clone(), input });
                }
                (Role::Assistant, blocks)
            }
            Message::Tool { tool_call_id, content } => {
                let name = names
                    .iter()
                    .rev()
                    .find(|(id, _)| id == tool_call_id)
                    .map(|(_, name)| name.clone())
                    .unwrap_or_else(|| "unknown".to_string());
                let error = content.starts_with("Error:");
                (Role::User, vec![Block::Result { id: tool_call_id.clone(), name, content: content.clone(), error }])
            }
        };
        if blocks.is_empty() {
            continue;
        }
        match out.turns.last_mut() {
            Some((last, turn)) if *last == role => turn.extend(blocks),
            _ => out.turns.push((role, blocks)),
        }
    }
    out
}

fn text(content: &str) -> Vec<Block> {
    if content.trim().is_empty() { Vec::new() } else { vec![Block::Text(content.to_string())] }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::run::message::ToolCall;

    #[test]
    fn roles_alternate_results_join_the_user_and_blank_text_is_dropped() {
        let messages = vec![
            Message::System { content: "You help.".into() },
            Message::User { content: "List and read.".into() },
            Message::Assistant {
                content: Some("Looking.".into()),
                tool_calls: vec![ToolCall::new("a", "ls", r#"{"path": "/"}"#), ToolCall::new("b", "read", "not json")],
            },
            Message::Tool { tool_call_id: "a".into(), content: "x.txt".into() },
            Message::Tool { tool_call_id: "b".into(), content: "Error: bad arguments".into() },
            Message::User { content: "Notice: one run ended.".into() },
            Message::Assistant { content: Some("  ".into()), tool_calls: Vec::new() },
            Message::Assistant { content: Some("Done.".into()), tool_calls: Vec::new() },
            Message::Tool { tool_call_id: "z".into(), content: "stray".into() },
        ];
        let got = conversation(&messages);
        assert_eq!(got.system, "You help.");
        let call = |id: &str, name: &str, input: Value| Block::Call { id: id.into(), name: name.into(), input };
        let result = |id: &str, name: &str, content: &str, error| Block::Result {
            id: id.into(),
            name: name.into(),
            content: content.into(),
            error,
        };
        assert_eq!(
            got.turns,
            vec![
                (Role::User, vec![Block::Text("List and read.".into())]),
                (
                    Role::Assistant,
                    vec![
                        Block::Text("Looking.".into()),
                        call("a", "ls", json!({"path": "/"})),
                        call("b", "read", json!({}))
                    ]
                ),
                (
                    Role::User,
                    vec![
                        result("a", "ls", "x.txt", false),
                        result("b", "read", "Error: bad arguments", true),
                        Block::Text("Notice: one run ended.".into()),
                    ]
                ),
                (Role::Assistant, vec![Block::Text("Done.".into())]),
                (Role::User, vec![result("z", "unknown", "stray", false)]),
            ]
        );
    }
}
