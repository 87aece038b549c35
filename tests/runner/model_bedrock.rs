//! The Bedrock client against stand-ins of Bedrock's ConverseStream and of STS: a request signed with
//! SigV4 (the stand-in signs what it received again and compares), the Converse body as the API
//! reference shapes it, the answer in AWS event-stream frames (encoded by the AWS crate, cut into
//! small pieces), exception frames, and credentials from the pod's web identity.

use std::collections::HashMap;
use std::time::SystemTime;

use aws_smithy_types::event_stream::{Header, HeaderValue, Message as Frame};
use serde_json::{Value, json};
use yuxi_operator::resources::model::{ModelParameters, ModelProvider};
use yuxi_operator::runner::model::aws::AwsEnvironment;
use yuxi_operator::runner::model::connection::Credentials;
use yuxi_operator::runner::model::{BedrockModel, Model, ModelDelta};

use crate::model_clients::{GATEWAY_TOKEN, connection, conversation, text_of, turn};
use crate::support::model_endpoint::{Answer, Endpoint, Received};

const MODEL_ID: &str = "anthropic.claude-3-5-sonnet-20240620-v1:0";
const ACCESS_KEY_ID: &str = "AKIDEXAMPLE";
const SECRET_ACCESS_KEY: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

/// One frame of an event stream: an event (`:event-type`) or an exception (`:exception-type`).
fn frame(message_type: &str, kind: &str, payload: Value) -> Vec<u8> {
    let kind_header = if message_type == "exception" { ":exception-type" } else { ":event-type" };
    let frame = Frame::new(payload.to_string().into_bytes())
        .add_header(Header::new(":message-type", HeaderValue::String(message_type.to_string().into())))
        .add_header(Header::new(kind_header, HeaderValue::String(kind.to_string().into())))
        .add_header(Header::new(":content-type", HeaderValue::String("application/json".into())));
    let mut bytes = Vec::new();
    aws_smithy_eventstream::frame::write_message_to(&frame, &mut bytes).expect("a frame");
    bytes
}

fn event(kind: &str, payload: Value) -> Vec<u8> {
    frame("event", kind, payload)
}

fn stream(frames: &[Vec<u8>]) -> Answer {
    Answer::ok("application/vnd.amazon.eventstream", frames.concat())
}

/// Text in two pieces, reasoning, then a `read_file` call with its input in two pieces; 100 new input
/// tokens, 900 read from the cache, 40 output tokens.
fn streamed_turn() -> Answer {
    stream(&[
        event("messageStart", json!({"role": "assistant", "p": "abcdefghijklmnopqrstuvwxyzABCDEFGH"})),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "One file."}}, "p": "abcd"}),
        ),
        event("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"text": "Let me "}, "p": "abcd"})),
        event("contentBlockDelta", json!({"contentBlockIndex": 0, "delta": {"text": "read it."}, "p": "abcd"})),
        event("contentBlockStop", json!({"contentBlockIndex": 0, "p": "abcd"})),
        event(
            "contentBlockStart",
            json!({"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "name": "read_file"}}, "p": "ab"}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "{\"path\": \"/out"}}, "p": "ab"}),
        ),
        event(
            "contentBlockDelta",
            json!({"contentBlockIndex": 1, "delta": {"toolUse": {"input": "puts/report.md\"}"}}, "p": "ab"}),
        ),
        event("contentBlockStop", json!({"contentBlockIndex": 1, "p": "ab"})),
        event("messageStop", json!({"stopReason": "tool_use", "p": "abcdef"})),
        event(
            "metadata",
            json!({"usage": {"inputTokens": 100, "outputTokens": 40, "totalTokens": 1040, "cacheReadInputTokens": 900, "cacheWriteInputTokens": 0},
                                 "metrics": {"latencyMs": 812}, "p": "abc"}),
        ),
    ])
}

/// Checks the request's SigV4 signature: its scope and signed headers, and the signature itself,
/// computed again from the request as it arrived with the keys the client should have used.
fn assert_signed(request: &Received, access_key_id: &str, secret_access_key: &str, session_token: &str) {
    let authorization = request.header("authorization");
    let fields: HashMap<&str, &str> = authorization
        .strip_prefix("AWS4-HMAC-SHA256 ")
        .expect("a SigV4 authorization")
        .split(", ")
        .filter_map(|field| field.split_once('='))
        .collect();
    let date = request.header("x-amz-date");
    assert_eq!(fields["Credential"], format!("{access_key_id}/{}/us-east-1/bedrock/aws4_request", &date[..8]));
    assert_eq!(fields["SignedHeaders"], "accept;content-type;host;x-amz-date;x-amz-security-token");
    assert_eq!(request.header("x-amz-security-token"), session_token);

    let time = jiff::civil::DateTime::strptime("%Y%m%dT%H%M%SZ", &date).expect("x-amz-date");
    let time = SystemTime::from(time.to_zoned(jiff::tz::TimeZone::UTC).expect("UTC").timestamp());
    let identity = aws_credential_types::Credentials::new(
        access_key_id,
        secret_access_key,
        Some(session_token.into()),
        None,
        "test",
    )
    .into();
    let settings = aws_sigv4::http_request::SigningSettings::default();
    let params = aws_sigv4::sign::v4::SigningParams::builder()
        .identity(&identity)
        .region("us-east-1")
        .name("bedrock")
        .time(time)
        .settings(settings)
        .build()
        .expect("params")
        .into();
    let (accept, content_type) = (request.header("accept"), request.header("content-type"));
    let url = format!("http://{}{}", request.header("host"), request.path_and_query);
    let signable = aws_sigv4::http_request::SignableRequest::new(
        "POST",
        url,
        [("accept", accept.as_str()), ("content-type", content_type.as_str())].into_iter(),
        aws_sigv4::http_request::SignableBody::Bytes(&request.body),
    )
    .expect("signable");
    let (instructions, _) = aws_sigv4::http_request::sign(signable, &params).expect("signed").into_parts();
    let expected =
        instructions.headers().find(|(name, _)| *name == "authorization").expect("authorization").1.to_string();
    assert_eq!(authorization, expected, "the signature covers the request as it arrived");
}

fn bedrock(endpoint: &Endpoint, credentials: Credentials) -> Model {
    let mut claude = connection(ModelProvider::Bedrock, &endpoint.base_url, MODEL_ID, credentials);
    claude.parameters =
        ModelParameters { temperature: Some(0.5), max_output_tokens: Some(1024), reasoning_effort: None };
    Model::connect(&claude).expect("model")
}

fn keys() -> Credentials {
    Credentials::Aws {
        access_key_id: ACCESS_KEY_ID.into(),
        secret_access_key: SECRET_ACCESS_KEY.into(),
        session_token: Some("session-token-of-the-secret".into()),
    }
}

#[tokio::test]
async fn bedrock_signs_the_converse_request_and_reads_the_event_stream() {
    let endpoint = Endpoint::start(vec![streamed_turn()]).await;
    let model = bedrock(&endpoint, keys());
    let (messages, tools) = conversation();
    let (result, deltas) = turn(&model, &messages, &tools).await;
    let turn = result.expect("a turn");
    assert_eq!(
        (turn.content.as_str(), text_of(&deltas)),
        ("Let me read it.", vec!["Let me ".into(), "read it.".into()])
    );
    assert!(deltas.contains(&ModelDelta::Reasoning("One file.".into())), "{deltas:?}");
    let call = &turn.tool_calls[0];
    assert_eq!((call.id.as_str(), call.function.name.as_str()), ("tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", "read_file"));
    assert_eq!(call.function.arguments, r#"{"path": "/outputs/report.md"}"#);
    let usage = turn.usage.expect("usage");
    assert_eq!(
        (usage.prompt_tokens, usage.cached_prompt_tokens, usage.completion_tokens, usage.total_tokens),
        (1000, 900, 40, 1040)
    );

    let request = &endpoint.received()[0];
    assert_eq!(request.path_and_query, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream");
    assert_eq!(request.header("x-gateway-token"), GATEWAY_TOKEN);
    assert_signed(request, ACCESS_KEY_ID, SECRET_ACCESS_KEY, "session-token-of-the-secret");
    let schema =
        |field: &str| json!({"type": "object", "properties": {field: {"type": "string"}}, "required": [field]});
    assert_eq!(
        request.json(),
        json!({
            "messages": [
                {"role": "user", "content": [{"text": "What is in the outputs?"}]},
                {"role": "assistant", "content": [{"text": "Looking."}, {"toolUse": {"toolUseId": "call_1", "name": "ls", "input": {"path": "/outputs"}}}]},
                {"role": "user", "content": [{"toolResult": {"toolUseId": "call_1", "content": [{"text": "report.md"}], "status": "success"}}]},
            ],
            "system": [{"text": "You help."}],
            "toolConfig": {"tools": [
                {"toolSpec": {"name": "ls", "description": "Lists a folder.", "inputSchema": {"json": schema("path")}}},
                {"toolSpec": {"name": "read_file", "description": "Reads a file.", "inputSchema": {"json": schema("path")}}},
            ]},
            "inferenceConfig": {"maxTokens": 1024, "temperature": 0.5},
        })
    );
}

#[tokio::test]
async fn bedrock_throttling_is_transient_in_a_frame_or_a_status_and_validation_is_fatal() {
    let message = |text: &str| json!({"message": text});
    let endpoint = Endpoint::start(vec![
        stream(&[
            event("messageStart", json!({"role": "assistant"})),
            frame("exception", "throttlingException", message("Too many tokens, please wait before trying again.")),
        ]),
        stream(&[frame(
            "exception",
            "validationException",
            message("The model returned the following errors: bad input"),
        )]),
        Answer::error(429, message("Too many requests, please wait before trying again.")).with_header(
            "x-amzn-ErrorType",
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
        ),
        Answer::error(400, message("Input is too long for requested model.")).with_header(
            "x-amzn-ErrorType",
            "ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/",
        ),
        stream(&[event("messageStart", json!({"role": "assistant"}))]),
    ])
    .await;
    let model = bedrock(&endpoint, keys());
    let (messages, tools) = conversation();
    let throttled = turn(&model, &messages, &tools).await.0.expect_err("throttled");
    assert!(throttled.is_transient() && throttled.to_string().contains("throttlingException"), "{throttled}");
    let invalid = turn(&model, &messages, &tools).await.0.expect_err("invalid");
    assert!(!invalid.is_transient() && invalid.to_string().contains("bad input"), "{invalid}");
    let limited = turn(&model, &messages, &tools).await.0.expect_err("429");
    assert!(limited.is_transient() && limited.to_string().contains("ThrottlingException"), "{limited}");
    let long = turn(&model, &messages, &tools).await.0.expect_err("too long");
    assert!(!long.is_transient() && long.to_string().starts_with("the conversation is longer than"), "{long}");
    let cut = turn(&model, &messages, &tools).await.0.expect_err("no messageStop");
    assert!(cut.is_transient(), "{cut}");
}

#[tokio::test]
async fn bedrock_exchanges_the_pods_web_identity_with_sts_once_and_signs_with_its_keys() {
    let expires = jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1);
    let sts_answer = format!(
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\
         <AssumeRoleWithWebIdentityResult><SubjectFromWebIdentityToken>system:serviceaccount:team-a:runner</SubjectFromWebIdentityToken>\
         <Credentials><SessionToken>FwoGZXIvYXdzEXAMPLE&amp;TOKEN</SessionToken><SecretAccessKey>sts-secret-access-key</SecretAccessKey>\
         <Expiration>{expires}</Expiration><AccessKeyId>ASIASTSEXAMPLE</AccessKeyId></Credentials>\
         <AssumedRoleUser><Arn>arn:aws:sts::123456789012:assumed-role/bedrock/yuxi-runner</Arn><AssumedRoleId>AROA:yuxi-runner</AssumedRoleId></AssumedRoleUser>\
         </AssumeRoleWithWebIdentityResult><ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE</RequestId></ResponseMetadata>\
         </AssumeRoleWithWebIdentityResponse>",
        expires = expires.strftime("%Y-%m-%dT%H:%M:%SZ")
    );
    let sts = Endpoint::start(vec![Answer::ok("text/xml", sts_answer)]).await;
    let endpoint = Endpoint::start(vec![streamed_turn(), streamed_turn()]).await;
    let dir = tempfile::TempDir::new().expect("dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "eyJhbGciOiJSUzI1NiJ9.web-identity.token\n").expect("token");
    let vars: HashMap<&str, String> = [
        ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/bedrock".to_string()),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", token_file.display().to_string()),
        ("AWS_STS_ENDPOINT", sts.base_url.clone()),
    ]
    .into();
    let environment = AwsEnvironment::read(|name| vars.get(name).cloned());
    let pod = connection(ModelProvider::Bedrock, &endpoint.base_url, MODEL_ID, Credentials::AwsFromEnvironment);
    let model = Model::Bedrock(BedrockModel::connect_with(&pod, environment).expect("model"));
    let (messages, tools) = conversation();
    for _ in 0..2 {
        turn(&model, &messages, &tools).await.0.expect("a turn");
    }

    let exchanges = sts.received();
    assert_eq!(exchanges.len(), 1, "the temporary keys are kept until shortly before they expire");
    assert_eq!((exchanges[0].method.as_str(), exchanges[0].path_and_query.as_str()), ("POST", "/"));
    assert_eq!(exchanges[0].header("authorization"), "", "AssumeRoleWithWebIdentity is not signed");
    let form: HashMap<String, String> = serde_urlencoded::from_bytes(&exchanges[0].body).expect("a form");
    assert_eq!(form["Action"], "AssumeRoleWithWebIdentity");
    assert_eq!(form["Version"], "2011-06-15");
    assert_eq!(form["RoleArn"], "arn:aws:iam::123456789012:role/bedrock");
    assert_eq!(form["WebIdentityToken"], "eyJhbGciOiJSUzI1NiJ9.web-identity.token");
    assert!(!form["RoleSessionName"].is_empty());
    for request in endpoint.received() {
        assert_signed(&request, "ASIASTSEXAMPLE", "sts-secret-access-key", "FwoGZXIvYXdzEXAMPLE&TOKEN");
    }
}

#[tokio::test]
async fn bedrock_takes_eks_pod_identity_keys_and_an_sts_refusal_shows_no_token() {
    let expires =
        (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(1)).strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let agent = Endpoint::start(vec![Answer::ok(
        "application/json",
        json!({"AccessKeyId": "ASIAPODIDENTITY", "SecretAccessKey": "pod-identity-secret", "Token": "pod-identity-session",
               "AccountId": "123456789012", "Expiration": expires})
        .to_string(),
    )])
    .await;
    let refusal = "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type>\
        <Code>InvalidIdentityToken</Code><Message>Incorrect token audience in eyJhbGciOiJSUzI1NiJ9.refused.token</Message></Error>\
        <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ErrorResponse>";
    let sts = Endpoint::start(vec![Answer {
        status: 400,
        headers: vec![("content-type".into(), "text/xml".into())],
        body: refusal.into(),
    }])
    .await;
    let endpoint = Endpoint::start(vec![streamed_turn()]).await;
    let dir = tempfile::TempDir::new().expect("dir");
    let (agent_token, web_token) = (dir.path().join("eks-pod-identity-token"), dir.path().join("token"));
    std::fs::write(&agent_token, "pod-identity-agent-token").expect("token");
    std::fs::write(&web_token, "eyJhbGciOiJSUzI1NiJ9.refused.token").expect("token");
    let pod = connection(ModelProvider::Bedrock, &endpoint.base_url, MODEL_ID, Credentials::AwsFromEnvironment);
    let (messages, tools) = conversation();

    let pod_identity: HashMap<&str, String> = [
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", format!("{}/v1/credentials", agent.base_url)),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", agent_token.display().to_string()),
    ]
    .into();
    let environment = AwsEnvironment::read(|name| pod_identity.get(name).cloned());
    let model = Model::Bedrock(BedrockModel::connect_with(&pod, environment).expect("model"));
    turn(&model, &messages, &tools).await.0.expect("a turn");
    let asked = &agent.received()[0];
    assert_eq!((asked.method.as_str(), asked.path_and_query.as_str()), ("GET", "/v1/credentials"));
    assert_eq!(asked.header("authorization"), "pod-identity-agent-token");
    assert_signed(&endpoint.received()[0], "ASIAPODIDENTITY", "pod-identity-secret", "pod-identity-session");

    let web_identity: HashMap<&str, String> = [
        ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/bedrock".to_string()),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", web_token.display().to_string()),
        ("AWS_ENDPOINT_URL_STS", sts.base_url.clone()),
    ]
    .into();
    let environment = AwsEnvironment::read(|name| web_identity.get(name).cloned());
    let model = Model::Bedrock(BedrockModel::connect_with(&pod, environment).expect("model"));
    let refused = turn(&model, &messages, &tools).await.0.expect_err("refused");
    let shown = refused.to_string();
    assert!(!refused.is_transient(), "{shown}");
    assert!(
        shown.contains("cannot assume the role arn:aws:iam::123456789012:role/bedrock")
            && shown.contains("InvalidIdentityToken"),
        "{shown}"
    );
    assert!(!shown.contains("refused.token"), "the web identity token is never shown: {shown}");
    assert_eq!(endpoint.received().len(), 1, "nothing is sent to Bedrock without keys");
}
