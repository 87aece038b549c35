//! The JSON-RPC 2.0 envelope of the A2A binding: a request ([`Request`]), an answer ([`response`],
//! [`error_response`]) and the protocol's error codes ([`Code`]).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A JSON-RPC request as read: `jsonrpc` must be `"2.0"`, `id` a string, a number or null.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Request {
    /// `"2.0"`.
    pub jsonrpc: String,
    /// The request id, echoed in the answer.
    #[serde(default)]
    pub id: Value,
    /// The method, as the A2A 1.0 binding names it (`SendMessage`).
    pub method: String,
    /// Its parameters.
    #[serde(default)]
    pub params: Value,
}

/// The methods of the A2A 1.0 JSON-RPC binding.
pub mod method {
    /// Send a message; answered with the task (or a message).
    pub const SEND_MESSAGE: &str = "SendMessage";
    /// Send a message; answered with the task's stream.
    pub const SEND_STREAMING_MESSAGE: &str = "SendStreamingMessage";
    /// Read a task.
    pub const GET_TASK: &str = "GetTask";
    /// List the caller's tasks.
    pub const LIST_TASKS: &str = "ListTasks";
    /// Cancel a task.
    pub const CANCEL_TASK: &str = "CancelTask";
    /// Follow a task's stream again.
    pub const SUBSCRIBE_TO_TASK: &str = "SubscribeToTask";
    /// The push notification configuration methods.
    pub const PUSH_CONFIG: [&str; 4] = [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ];
    /// The card for an authenticated caller.
    pub const GET_EXTENDED_AGENT_CARD: &str = "GetExtendedAgentCard";
}

/// An A2A error code (the spec's JSON-RPC mapping).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// -32700: the body is not JSON.
    Parse,
    /// -32600: not a JSON-RPC request.
    InvalidRequest,
    /// -32601: no such method.
    MethodNotFound,
    /// -32602: the parameters break a rule (`data.field` names it).
    InvalidParams,
    /// -32603: the server failed.
    Internal,
    /// -32001: no such task (or another caller's).
    TaskNotFound,
    /// -32002: the task cannot be canceled (it has ended).
    TaskNotCancelable,
    /// -32003: push notifications are not served.
    PushNotificationNotSupported,
    /// -32004: the operation is not served in this state.
    UnsupportedOperation,
    /// -32005: a part's content type is not taken.
    ContentTypeNotSupported,
    /// -32006: a remote agent answered something that is not A2A.
    InvalidAgentResponse,
    /// -32007: no extended card.
    ExtendedAgentCardNotConfigured,
    /// -32009: the protocol version is not spoken.
    VersionNotSupported,
}

impl Code {
    /// The number.
    pub fn number(self) -> i64 {
        match self {
            Self::Parse => -32700,
            Self::InvalidRequest => -32600,
            Self::MethodNotFound => -32601,
            Self::InvalidParams => -32602,
            Self::Internal => -32603,
            Self::TaskNotFound => -32001,
            Self::TaskNotCancelable => -32002,
            Self::PushNotificationNotSupported => -32003,
            Self::UnsupportedOperation => -32004,
            Self::ContentTypeNotSupported => -32005,
            Self::InvalidAgentResponse => -32006,
            Self::ExtendedAgentCardNotConfigured => -32007,
            Self::VersionNotSupported => -32009,
        }
    }
}

/// An error answer: `code`, `message`, and `data` (`{"field": ...}` when a field broke a rule).
#[derive(Clone, Debug, PartialEq)]
pub struct RpcError {
    /// The code.
    pub code: Code,
    /// What went wrong, for a person.
    pub message: String,
    /// The field that broke a rule, when one did.
    pub field: Option<String>,
}

impl RpcError {
    /// An error with no field.
    pub fn new(code: Code, message: impl Into<String>) -> RpcError {
        RpcError { code, message: message.into(), field: None }
    }

    /// Invalid parameters: `field` breaks a rule.
    pub fn invalid(field: impl Into<String>, message: impl std::fmt::Display) -> RpcError {
        let field = field.into();
        RpcError { code: Code::InvalidParams, message: format!("{field}: {message}"), field: Some(field) }
    }

    /// The task `id` does not exist, or is not the caller's: the same answer.
    pub fn task_not_found(id: &str) -> RpcError {
        RpcError::new(Code::TaskNotFound, format!("task {id:?} does not exist"))
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code.number())
    }
}

/// The answer of request `id` with `result`.
pub fn response(id: &Value, result: impl Serialize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// The error answer of request `id`.
pub fn error_response(id: &Value, error: &RpcError) -> Value {
    let mut body = json!({"code": error.code.number(), "message": error.message});
    if let Some(field) = &error.field {
        body["data"] = json!({"field": field});
    }
    json!({"jsonrpc": "2.0", "id": id, "error": body})
}

/// The result of an answer read back (a client's view): the `result`, or the error's code and message.
pub fn result_of(answer: Value) -> Result<Value, (i64, String)> {
    if let Some(error) = answer.get("error") {
        let code = error["code"].as_i64().unwrap_or_default();
        let message = error["message"].as_str().unwrap_or("no message").to_string();
        return Err((code, message));
    }
    match answer {
        Value::Object(mut map) => map.remove("result").ok_or((Code::InvalidAgentResponse.number(), "no result".into())),
        _ => Err((Code::InvalidAgentResponse.number(), "the answer is not a JSON-RPC object".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_carry_their_code_and_the_field_that_broke_a_rule() {
        let answer = error_response(&json!(7), &RpcError::invalid("message.parts", "is empty"));
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["error"]["code"], -32602);
        assert_eq!(answer["error"]["data"]["field"], "message.parts");
        assert_eq!(result_of(answer), Err((-32602, "message.parts: is empty".into())));
        assert_eq!(result_of(response(&json!("a"), json!({"x": 1}))), Ok(json!({"x": 1})));
        assert!(result_of(json!([1])).is_err(), "a body that is not an object is no answer");
    }
}
