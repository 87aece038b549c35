//! The Anthropic client against a stand-in of the Messages API: the request as the API reference shapes
//! it (headers, system prompt and tools marked for caching, tool use and results), the streamed answer
//! as "Streaming Messages" documents it, and its errors.

use std::time::Duration;

use serde_json::{Value, json};
use yuxi_operator::resources::model::{ModelParameters, ModelProvider};
use yuxi_operator::runner::model::connection::Credentials;
use yuxi_operator::runner::model::{Model, ModelDelta};

use crate::model_clients::{GATEWAY_TOKEN, KEY, connection, conversation, text_of, turn};
use crate::support::model_endpoint::{Answer, Endpoint};

/// Events as the API streams them: `event: <type>` and `data: <event>`.
fn events(events: &[Value]) -> Answer {
    let text: String =
        events.iter().map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().expect("type"))).collect();
    Answer::ok("text/event-stream; charset=utf-8", text)
}

fn delta(index: u32, delta: Value) -> Value {
    json!({"type": "content_block_delta", "index": index, "delta": delta})
}

/// A turn that says a sentence in two pieces, thinks, and calls `read_file` with its arguments in
/// three pieces; 472 new input tokens, 1800 read from the cache, 89 output tokens.
fn streamed_turn() -> Answer {
    events(&[
        json!({"type": "message_start", "message": {"id": "msg_014p7gG3wDgGV9EUtLvnow3U", "type": "message", "role": "assistant",
               "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "stop_sequence": null,
               "usage": {"input_tokens": 472, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1800, "output_tokens": 2}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        delta(0, json!({"type": "thinking_delta", "thinking": "The listing names one file."})),
        delta(
            0,
            json!({"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"}),
        ),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
        delta(1, json!({"type": "text_delta", "text": "Okay, let's"})),
        delta(1, json!({"type": "text_delta", "text": " read the report."})),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6", "name": "read_file", "input": {}}}),
        delta(2, json!({"type": "input_json_delta", "partial_json": ""})),
        delta(2, json!({"type": "input_json_delta", "partial_json": "{\"path\": \"/out"})),
        delta(2, json!({"type": "input_json_delta", "partial_json": "puts/report.md\"}"})),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 89}}),
        json!({"type": "message_stop"}),
    ])
}

fn anthropic(endpoint: &Endpoint, parameters: ModelParameters) -> Model {
    let mut claude =
        connection(ModelProvider::Anthropic, &endpoint.base_url, "claude-sonnet-4-5", Credentials::ApiKey(KEY.into()));
    claude.parameters = parameters;
    Model::connect(&claude).expect("model")
}

#[tokio::test]
async fn anthropic_sends_the_messages_shape_with_caching_and_streams_text_thinking_and_a_tool_call() {
    let endpoint = Endpoint::start(vec![streamed_turn()]).await;
    let model = anthropic(&endpoint, ModelParameters::default());
    let (messages, tools) = conversation();
    let (result, deltas) = turn(&model, &messages, &tools).await;
    let turn = result.expect("a turn");
    assert_eq!(turn.content, "Okay, let's read the report.");
    assert_eq!(text_of(&deltas), ["Okay, let's", " read the report."]);
    assert!(deltas.contains(&ModelDelta::Reasoning("The listing names one file.".into())), "{deltas:?}");
    assert_eq!(turn.tool_calls.len(), 1);
    let call = &turn.tool_calls[0];
    assert_eq!((call.id.as_str(), call.function.name.as_str()), ("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "read_file"));
    assert_eq!(call.function.arguments, r#"{"path": "/outputs/report.md"}"#);
    let usage = turn.usage.expect("usage");
    assert_eq!(
        (usage.prompt_tokens, usage.cached_prompt_tokens, usage.completion_tokens, usage.total_tokens),
        (2272, 1800, 89, 2361),
        "prompt tokens count the cached ones"
    );

    let request = &endpoint.received()[0];
    assert_eq!((request.method.as_str(), request.path_and_query.as_str()), ("POST", "/v1/messages"));
    assert_eq!(request.header("x-api-key"), KEY);
    assert_eq!(request.header("anthropic-version"), "2023-06-01");
    assert_eq!(request.header("content-type"), "application/json");
    assert_eq!(request.header("x-gateway-token"), GATEWAY_TOKEN);
    let schema =
        |field: &str| json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]});
    assert_eq!(
        request.json(),
        json!({
            "model": "claude-sonnet-4-5",
            "max_tokens": 4096,
            "stream": true,
            "system": [{"type": "text", "text": "You help.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "What is in the outputs?"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "call_1", "name": "ls", "input": {"path": "/outputs"}},
                ]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "report.md", "is_error": false}]},
            ],
            "tools": [
                {"name": "ls", "description": "Lists a folder.", "input_schema": schema("path")},
                {"name": "read_file", "description": "Reads a file.", "input_schema": schema("path"), "cache_control": {"type": "ephemeral"}},
            ],
        })
    );
}

#[tokio::test]
async fn anthropic_overload_and_rate_limits_are_transient_with_their_wait_and_a_long_prompt_is_fatal() {
    let error = |kind: &str, message: &str| json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"});
    let endpoint = Endpoint::start(vec![
        Answer::error(529, error("overloaded_error", "Overloaded")),
        Answer::error(
            429,
            error("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"),
        )
        .with_header("retry-after", "7"),
        Answer::error(400, error("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")),
    ])
    .await;
    let parameters = ModelParameters { temperature: Some(1.5), max_output_tokens: Some(1000), reasoning_effort: None };
    let model = anthropic(&endpoint, parameters);
    let (messages, tools) = conversation();

    let overloaded = turn(&model, &messages, &tools).await.0.expect_err("overloaded");
    assert!(overloaded.is_transient() && overloaded.to_string().contains("529 (overloaded_error)"), "{overloaded}");
    let limited = turn(&model, &messages, &tools).await.0.expect_err("rate limited");
    assert_eq!((limited.is_transient(), limited.retry_after()), (true, Some(Duration::from_secs(7))));
    let long = turn(&model, &messages, &tools).await.0.expect_err("too long");
    assert!(!long.is_transient(), "{long}");
    assert!(long.to_string().starts_with("the conversation is longer than the model's context window"), "{long}");
    assert!(long.to_string().contains("210000 tokens > 200000 maximum"), "{long}");

    let body = endpoint.received()[0].json();
    assert_eq!(
        (body["max_tokens"].clone(), body["temperature"].clone()),
        (json!(1000), json!(1.0)),
        "the API's ceiling is 1"
    );
}

#[tokio::test]
async fn anthropic_an_error_event_inside_the_stream_is_read_by_its_kind_and_a_cut_stream_is_transient() {
    let start = json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
                       "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 10, "output_tokens": 1}}});
    let text = json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}});
    let hello = delta(0, json!({"type": "text_delta", "text": "Hel"}));
    let endpoint = Endpoint::start(vec![
        events(&[
            start.clone(),
            text.clone(),
            hello.clone(),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]),
        events(&[
            start.clone(),
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad tool_use"}}),
        ]),
        events(&[start, text, hello]),
    ])
    .await;
    let model = anthropic(&endpoint, ModelParameters::default());
    let (messages, tools) = conversation();
    let overloaded = turn(&model, &messages, &tools).await.0.expect_err("overloaded mid-stream");
    assert!(overloaded.is_transient() && overloaded.to_string().contains("overloaded_error"), "{overloaded}");
    let invalid = turn(&model, &messages, &tools).await.0.expect_err("invalid");
    assert!(!invalid.is_transient(), "{invalid}");
    let cut = turn(&model, &messages, &tools).await.0.expect_err("no message_stop");
    assert!(cut.is_transient() && cut.to_string().contains("ended before the answer did"), "{cut}");
}
