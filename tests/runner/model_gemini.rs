//! The Gemini client against a stand-in of the Gemini API's `streamGenerateContent` (server-sent events,
//! `\r\n` line ends as Google sends them): the request as the API reference shapes it, thought
//! signatures sent back with their calls, usage, and errors.

use std::time::Duration;

use serde_json::{Value, json};
use yuxi_operator::resources::model::{ModelParameters, ModelProvider, ReasoningEffort};
use yuxi_operator::run::message::Message;
use yuxi_operator::runner::model::Model;
use yuxi_operator::runner::model::connection::Credentials;

use crate::model_clients::{GATEWAY_TOKEN, KEY, connection, conversation, text_of, turn};
use crate::support::model_endpoint::{Answer, Endpoint};

/// `GenerateContentResponse`s as `alt=sse` streams them.
fn responses(responses: &[Value]) -> Answer {
    Answer::ok("text/event-stream", responses.iter().map(|r| format!("data: {r}\r\n\r\n")).collect::<String>())
}

fn parts(parts: Value, finish: Option<&str>) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(reason) = finish {
        candidate["finishReason"] = json!(reason);
    }
    json!({"candidates": [candidate], "usageMetadata": {"promptTokenCount": 1500, "totalTokenCount": 1500}, "modelVersion": "gemini-2.5-flash", "responseId": "mAitaLmkHPPlz7IPvtfUqQ4"})
}

/// Text in two pieces, then a signed call of `read_file`, with usage: 1500 prompt tokens of which 1024
/// cached, 25 answer and 40 thinking tokens.
fn streamed_turn() -> Answer {
    let mut last = parts(
        json!([{"functionCall": {"name": "read_file", "args": {"path": "/outputs/report.md"}}, "thoughtSignature": "c2lnbmF0dXJlLW9uZQ=="}]),
        Some("STOP"),
    );
    last["usageMetadata"] = json!({"promptTokenCount": 1500, "candidatesTokenCount": 25, "totalTokenCount": 1565,
        "cachedContentTokenCount": 1024, "thoughtsTokenCount": 40,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1500}]});
    responses(&[parts(json!([{"text": "Let me"}]), None), parts(json!([{"text": " read it."}]), None), last])
}

fn gemini(endpoint: &Endpoint, model: &str, parameters: ModelParameters) -> Model {
    let mut gemini = connection(ModelProvider::Gemini, &endpoint.base_url, model, Credentials::ApiKey(KEY.into()));
    gemini.parameters = parameters;
    Model::connect(&gemini).expect("model")
}

#[tokio::test]
async fn gemini_sends_contents_and_declarations_streams_a_signed_call_and_sends_the_signature_back() {
    let done = responses(&[parts(json!([{"text": "It is a report."}]), Some("STOP"))]);
    let endpoint = Endpoint::start(vec![streamed_turn(), done]).await;
    let parameters = ModelParameters {
        temperature: Some(0.3),
        max_output_tokens: Some(2048),
        reasoning_effort: Some(ReasoningEffort::Low),
    };
    let model = gemini(&endpoint, "gemini-2.5-flash", parameters);
    let (mut messages, tools) = conversation();
    let (result, deltas) = turn(&model, &messages, &tools).await;
    let first = result.expect("a turn");
    assert_eq!(
        (first.content.as_str(), text_of(&deltas)),
        ("Let me read it.", vec!["Let me".into(), " read it.".into()])
    );
    assert_eq!(first.tool_calls.len(), 1);
    assert_eq!(
        (first.tool_calls[0].function.name.as_str(), first.tool_calls[0].function.arguments.as_str()),
        ("read_file", r#"{"path":"/outputs/report.md"}"#)
    );
    let usage = first.usage.clone().expect("usage");
    assert_eq!(
        (usage.prompt_tokens, usage.cached_prompt_tokens, usage.completion_tokens, usage.total_tokens),
        (1500, 1024, 65, 1565),
        "thinking tokens are completion tokens"
    );

    let request = &endpoint.received()[0];
    assert_eq!(request.path_and_query, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    assert_eq!(
        (request.header("x-goog-api-key"), request.header("x-gateway-token")),
        (KEY.to_string(), GATEWAY_TOKEN.to_string())
    );
    let schema =
        |field: &str| json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]});
    assert_eq!(
        request.json(),
        json!({
            "contents": [
                {"role": "user", "parts": [{"text": "What is in the outputs?"}]},
                {"role": "model", "parts": [
                    {"text": "Looking."},
                    {"functionCall": {"name": "ls", "args": {"path": "/outputs"}}, "thoughtSignature": "skip_thought_signature_validator"},
                ]},
                {"role": "user", "parts": [{"functionResponse": {"name": "ls", "response": {"output": "report.md"}}}]},
            ],
            "systemInstruction": {"parts": [{"text": "You help."}]},
            "tools": [{"functionDeclarations": [
                {"name": "ls", "description": "Lists a folder.", "parametersJsonSchema": schema("path")},
                {"name": "read_file", "description": "Reads a file.", "parametersJsonSchema": schema("path")},
            ]}],
            "generationConfig": {"temperature": 0.3, "maxOutputTokens": 2048, "thinkingConfig": {"thinkingBudget": 1024}},
        })
    );

    let call = first.tool_calls[0].clone();
    messages.push(Message::Assistant { content: Some(first.content.clone()), tool_calls: vec![call.clone()] });
    messages.push(Message::Tool { tool_call_id: call.id.clone(), content: "Error: no such file".into() });
    let second = turn(&model, &messages, &tools).await.0.expect("a second turn");
    assert_eq!(second.content, "It is a report.");
    let sent = endpoint.received()[1].json();
    assert_eq!(
        sent["contents"][3]["parts"][1],
        json!({"functionCall": {"name": "read_file", "args": {"path": "/outputs/report.md"}}, "thoughtSignature": "c2lnbmF0dXJlLW9uZQ=="}),
        "the call goes back with the signature it came with"
    );
    assert_eq!(
        sent["contents"][4]["parts"][0],
        json!({"functionResponse": {"name": "read_file", "response": {"error": "Error: no such file"}}})
    );
}

#[tokio::test]
async fn gemini_quota_errors_wait_as_retry_info_says_and_long_or_withheld_answers_are_fatal() {
    let exhausted = json!({"error": {"code": 429, "message": "You exceeded your current quota.", "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{"quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_input_token_count"}]},
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2.5s"}]}});
    let too_long = json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
        "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."}});
    let endpoint = Endpoint::start(vec![
        Answer::error(429, exhausted),
        Answer::error(400, too_long),
        responses(&[parts(json!([]), Some("SAFETY"))]),
        responses(&[parts(json!([{"text": "cut"}]), None)]),
    ])
    .await;
    let parameters = ModelParameters { reasoning_effort: Some(ReasoningEffort::High), ..ModelParameters::default() };
    let model = gemini(&endpoint, "gemini-3-pro-preview", parameters);
    let (messages, tools) = conversation();
    let limited = turn(&model, &messages, &tools).await.0.expect_err("quota");
    assert_eq!((limited.is_transient(), limited.retry_after()), (true, Some(Duration::from_millis(2500))));
    assert!(limited.to_string().contains("RESOURCE_EXHAUSTED"), "{limited}");
    let long = turn(&model, &messages, &tools).await.0.expect_err("too long");
    assert!(!long.is_transient() && long.to_string().starts_with("the conversation is longer than"), "{long}");
    let withheld = turn(&model, &messages, &tools).await.0.expect_err("withheld");
    assert!(!withheld.is_transient() && withheld.to_string().contains("SAFETY"), "{withheld}");
    let cut = turn(&model, &messages, &tools).await.0.expect_err("no finish reason");
    assert!(cut.is_transient(), "{cut}");
    assert_eq!(endpoint.received()[0].json()["generationConfig"], json!({"thinkingConfig": {"thinkingLevel": "high"}}));
}
