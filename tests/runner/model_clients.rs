//! The native model clients against stand-ins of their providers' APIs: what every client shares
//! (extra headers, the CA bundle, errors without secrets), and OpenAI's and Azure OpenAI's Chat
//! Completions. The other providers have a file each; the helpers here build their Models.

use serde_json::{Value, json};
use tokio::sync::mpsc;
use yuxi_operator::resources::model::{Endpoint as ModelEndpoint, ModelParameters, ModelProvider, ReasoningEffort};
use yuxi_operator::run::message::{Message, ToolCall};
use yuxi_operator::runner::model::connection::{Connection, Credentials};
use yuxi_operator::runner::model::{Model, ModelDelta, ModelError, ModelTurn};
use yuxi_operator::runner::tools::ToolSpec;

use crate::support::model_endpoint::{Answer, Endpoint};

/// The key every stand-in expects, and the value of the extra header every Model sends.
pub const KEY: &str = "sk-test-key-0123456789";
pub const GATEWAY_TOKEN: &str = "gateway-token-9876543210";

/// A Model resource's connection to `base_url`, with an extra header from a Secret.
pub fn connection(provider: ModelProvider, base_url: &str, model: &str, credentials: Credentials) -> Connection {
    Connection {
        caller_audience: None,
        name: "team-a".into(),
        endpoint: ModelEndpoint {
            provider,
            base_url: base_url.into(),
            model: model.into(),
            api_version: (provider == ModelProvider::AzureOpenAI).then(|| "2024-10-21".into()),
            region: (provider == ModelProvider::Bedrock).then(|| "us-east-1".into()),
        },
        credentials,
        headers: vec![("X-Gateway-Token".into(), GATEWAY_TOKEN.into())],
        ca_bundle: None,
        parameters: ModelParameters::default(),
        pricing: None,
    }
}

/// A conversation with a system prompt, a finished tool round, and the tools it may call.
pub fn conversation() -> (Vec<Message>, Vec<ToolSpec>) {
    let messages = vec![
        Message::System { content: "You help.".into() },
        Message::User { content: "What is in the outputs?".into() },
        Message::Assistant {
            content: Some("Looking.".into()),
            tool_calls: vec![ToolCall::new("call_1", "ls", r#"{"path": "/outputs"}"#)],
        },
        Message::Tool { tool_call_id: "call_1".into(), content: "report.md".into() },
    ];
    let schema =
        |field: &str| json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]});
    let tools = vec![
        ToolSpec { name: "ls".into(), description: "Lists a folder.".into(), parameters: schema("path") },
        ToolSpec { name: "read_file".into(), description: "Reads a file.".into(), parameters: schema("path") },
    ];
    (messages, tools)
}

/// One turn of `model`, with the deltas it streamed.
pub async fn turn(
    model: &Model,
    messages: &[Message],
    tools: &[ToolSpec],
) -> (Result<ModelTurn, ModelError>, Vec<ModelDelta>) {
    let (sender, mut receiver) = mpsc::unbounded_channel();
    let result = model.complete(messages, tools, &sender).await;
    drop(sender);
    let mut deltas = Vec::new();
    while let Some(delta) = receiver.recv().await {
        deltas.push(delta);
    }
    (result, deltas)
}

/// The streamed text of `deltas`.
pub fn text_of(deltas: &[ModelDelta]) -> Vec<String> {
    deltas
        .iter()
        .filter_map(|d| match d {
            ModelDelta::Content(text) => Some(text.clone()),
            ModelDelta::Reasoning(_) => None,
        })
        .collect()
}

/// Chat Completions chunks as OpenAI's API reference streams them: `data: <chunk>` events, then
/// `data: [DONE]`.
fn chat_stream(chunks: &[Value], done: bool) -> Answer {
    let mut text: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    if done {
        text.push_str("data: [DONE]\n\n");
    }
    Answer::ok("text/event-stream", text)
}

fn chunk(delta: Value, finish: Value) -> Value {
    json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764460800, "model": "gpt-4o",
           "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
}

fn answer_with_cached_usage() -> Answer {
    chat_stream(
        &[
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": "It holds "}), Value::Null),
            chunk(json!({"content": "report.md."}), Value::Null),
            chunk(json!({}), json!("stop")),
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1764460800, "model": "gpt-4o", "choices": [],
                   "usage": {"prompt_tokens": 2006, "completion_tokens": 300, "total_tokens": 2306,
                             "prompt_tokens_details": {"cached_tokens": 1920, "audio_tokens": 0},
                             "completion_tokens_details": {"reasoning_tokens": 0}}}),
        ],
        true,
    )
}

#[tokio::test]
async fn azure_calls_the_deployment_with_its_api_key_and_reads_cached_tokens() {
    let endpoint = Endpoint::start(vec![answer_with_cached_usage()]).await;
    let mut azure = connection(ModelProvider::AzureOpenAI, &endpoint.base_url, "chat", Credentials::ApiKey(KEY.into()));
    azure.parameters = ModelParameters { temperature: Some(0.4), max_output_tokens: Some(800), reasoning_effort: None };
    let model = Model::connect(&azure).expect("model");
    let (messages, tools) = conversation();
    let (result, deltas) = turn(&model, &messages, &tools).await;
    let turn = result.expect("a turn");
    assert_eq!(
        (turn.content.as_str(), text_of(&deltas)),
        ("It holds report.md.", vec!["It holds ".into(), "report.md.".into()])
    );
    let usage = turn.usage.expect("usage");
    assert_eq!((usage.prompt_tokens, usage.cached_prompt_tokens, usage.total_tokens), (2006, 1920, 2306));

    let request = &endpoint.received()[0];
    assert_eq!(request.path_and_query, "/openai/deployments/chat/chat/completions?api-version=2024-10-21");
    assert_eq!((request.header("api-key"), request.header("authorization")), (KEY.to_string(), String::new()));
    assert_eq!(request.header("x-gateway-token"), GATEWAY_TOKEN);
    let body = request.json();
    assert_eq!(body.get("model"), None, "the deployment names the model");
    assert_eq!((body["temperature"].clone(), body["max_completion_tokens"].clone()), (json!(0.4), json!(800)));
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"],
        json!({"name": "ls", "arguments": r#"{"path": "/outputs"}"#})
    );
    assert_eq!(body["tools"][1]["function"]["name"], "read_file");
}

#[tokio::test]
async fn openai_sends_a_bearer_key_the_reasoning_effort_and_a_cut_stream_is_transient() {
    let cut = chat_stream(&[chunk(json!({"content": "It holds"}), Value::Null)], false);
    let endpoint = Endpoint::start(vec![answer_with_cached_usage(), cut]).await;
    let mut openai = connection(ModelProvider::OpenAI, &endpoint.base_url, "o4-mini", Credentials::ApiKey(KEY.into()));
    openai.parameters.reasoning_effort = Some(ReasoningEffort::High);
    let model = Model::connect(&openai).expect("model");
    let (messages, tools) = conversation();
    assert_eq!(
        turn(&model, &messages, &tools).await.0.expect("a turn").usage.expect("usage").cached_prompt_tokens,
        1920
    );
    let (cut, _) = turn(&model, &messages, &tools).await;
    let error = cut.expect_err("the stream was cut");
    assert!(error.is_transient() && error.to_string().contains("ended before the answer did"), "{error}");

    let request = &endpoint.received()[0];
    assert_eq!((request.method.as_str(), request.path_and_query.as_str()), ("POST", "/chat/completions"));
    assert_eq!(request.header("authorization"), format!("Bearer {KEY}"));
    assert_eq!(request.header("x-gateway-token"), GATEWAY_TOKEN);
    assert_eq!(
        (request.json()["model"].clone(), request.json()["reasoning_effort"].clone()),
        (json!("o4-mini"), json!("high"))
    );
}

#[tokio::test]
async fn a_ca_bundle_replaces_the_system_roots() {
    let trusted = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let other = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("certificate");
    let (cert, key) = (trusted.cert.pem(), trusted.signing_key.serialize_pem());
    let endpoint = Endpoint::start_tls(vec![answer_with_cached_usage()], &cert, &key).await;
    let (messages, tools) = conversation();
    let with = |bundle: Option<String>| {
        let mut tls = connection(ModelProvider::OpenAI, &endpoint.base_url, "gpt-4o", Credentials::ApiKey(KEY.into()));
        tls.ca_bundle = bundle;
        Model::connect(&tls).expect("model")
    };
    for (bundle, what) in [(None, "the system's roots"), (Some(other.cert.pem()), "another CA")] {
        let error = turn(&with(bundle), &messages, &tools).await.0.expect_err("the certificate is not trusted");
        assert!(error.to_string().contains("cannot reach the model endpoint"), "{what}: {error}");
    }
    let turn = turn(&with(Some(cert)), &messages, &tools).await.0.expect("trusted by its bundle");
    assert_eq!(turn.content, "It holds report.md.");
    assert_eq!(endpoint.received().len(), 1, "only the trusting client's request arrived");
}

#[tokio::test]
async fn no_error_shows_a_key_a_token_or_a_header_value() {
    let (access_key_id, secret_access_key, session_token) =
        ("AKIAEXAMPLEKEYID0001", "aws-secret-access-key-0001", "aws-session-token-0001");
    let aws = Credentials::Aws {
        access_key_id: access_key_id.into(),
        secret_access_key: secret_access_key.into(),
        session_token: Some(session_token.into()),
    };
    let key = Credentials::ApiKey(KEY.into());
    // Each provider's stand-in answers 401 with a message that repeats every credential the client sent.
    let echo = |sent: &[&str]| format!("refused, you sent: {}", sent.join(" "));
    let with_key = echo(&[KEY, GATEWAY_TOKEN]);
    let with_aws = echo(&[access_key_id, secret_access_key, session_token, GATEWAY_TOKEN]);
    let providers = [
        (ModelProvider::OpenAI, key.clone(), json!({"error": {"message": with_key, "type": "invalid_request_error"}})),
        (ModelProvider::AzureOpenAI, key.clone(), json!({"error": {"code": "401", "message": with_key}})),
        (
            ModelProvider::Anthropic,
            key.clone(),
            json!({"type": "error", "error": {"type": "authentication_error", "message": with_key}}),
        ),
        (ModelProvider::Gemini, key, json!({"error": {"code": 401, "message": with_key, "status": "UNAUTHENTICATED"}})),
        (ModelProvider::Bedrock, aws, json!({"message": with_aws})),
    ];
    let (messages, tools) = conversation();
    for (provider, credentials, body) in providers {
        let endpoint = Endpoint::start(vec![Answer::error(401, body)]).await;
        let model = Model::connect(&connection(provider, &endpoint.base_url, "m", credentials)).expect("model");
        let error = turn(&model, &messages, &tools).await.0.expect_err("refused");
        let shown = format!("{error} {error:?}");
        assert!(!error.is_transient() && shown.contains("refused the credentials"), "{provider:?}: {shown}");
        assert!(shown.contains("you sent: <redacted>"), "{provider:?}: {shown}");
        for secret in [KEY, GATEWAY_TOKEN, access_key_id, secret_access_key, session_token] {
            assert!(!shown.contains(secret), "{provider:?} shows {secret}: {shown}");
        }
    }
}
