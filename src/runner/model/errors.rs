//! A provider's error answer read into a [`ModelError`], the same way for every provider: which
//! failures are worth retrying (408, 429, 5xx, overload and throttling by any name), how long the
//! provider asked to wait, and which 400s mean a conversation longer than the model's context window.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use super::turn::ModelError;

/// The most characters of a provider's error message kept in a [`ModelError`].
const MAX_MESSAGE_CHARS: usize = 500;

/// What a provider's error answer says: its message, its kind (`error.type`, `error.status`,
/// `error.code`, or AWS's error type) and the wait it asks for in its body (Gemini's `RetryInfo`).
#[derive(Debug, Default, PartialEq)]
pub struct ProviderError {
    /// The provider's message.
    pub message: Option<String>,
    /// The provider's name for the error (`rate_limit_error`, `RESOURCE_EXHAUSTED`, `ThrottlingException`).
    pub kind: Option<String>,
    /// `error.details[].retryDelay` of a `google.rpc.RetryInfo`.
    pub retry_delay: Option<Duration>,
}

/// Reads an error body in any provider's shape: `{"error": {"message", "type" | "status" | "code",
/// "details"}}` (OpenAI, Azure, Anthropic, Gemini; Gemini also as a one-element list), or `{"message"}`
/// (Bedrock, whose kind is in the `x-amzn-ErrorType` header).
pub fn provider_error(body: &str) -> ProviderError {
    let Ok(value) = serde_json::from_str::<Value>(body) else { return ProviderError::default() };
    let value = match value {
        Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
        other => other,
    };
    let text = |v: &Value| v.as_str().map(str::to_string);
    match value.get("error") {
        Some(Value::Object(error)) => ProviderError {
            message: error.get("message").and_then(text),
            kind: ["type", "status", "code"]
                .iter()
                .find_map(|key| error.get(*key).and_then(|v| text(v).or_else(|| v.as_i64().map(|n| n.to_string())))),
            retry_delay: error.get("details").and_then(Value::as_array).and_then(|details| {
                details
                    .iter()
                    .filter(|d| d["@type"].as_str().is_some_and(|t| t.ends_with("google.rpc.RetryInfo")))
                    .find_map(|d| d["retryDelay"].as_str().and_then(seconds))
            }),
        },
        Some(Value::String(message)) => ProviderError { message: Some(message.clone()), ..ProviderError::default() },
        _ => ProviderError {
            message: value.get("message").or_else(|| value.get("Message")).and_then(text),
            ..ProviderError::default()
        },
    }
}

/// A protobuf duration as JSON writes it (`"37s"`, `"1.5s"`).
fn seconds(text: &str) -> Option<Duration> {
    text.strip_suffix('s')?.parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0).map(Duration::from_secs_f64)
}

/// The wait an answer's headers ask for: `retry-after-ms` (milliseconds; Azure OpenAI sends it, and
/// OpenAI's and Anthropic's SDKs read it), else `retry-after` in seconds or as an HTTP date (RFC 9110).
pub fn retry_after(headers: &HeaderMap, now: jiff::Timestamp) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let date = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    Some(Duration::try_from(date.duration_since(now)).unwrap_or(Duration::ZERO))
}

/// Whether an error kind means "try again later" whatever the status: overload and throttling as
/// Anthropic, Gemini and Bedrock name them (Bedrock's exceptions also arrive inside a stream).
pub fn transient_kind(kind: &str) -> bool {
    let kind = kind.to_ascii_lowercase();
    [
        "overloaded_error",
        "rate_limit_error",
        "api_error",
        "server_error",
        "resource_exhausted",
        "unavailable",
        "internal",
        "throttlingexception",
        "serviceunavailableexception",
        "internalserverexception",
        "modelnotreadyexception",
        "modelstreamerrorexception",
        "modeltimeoutexception",
    ]
    .contains(&kind.as_str())
}

/// Whether a provider's 400 says the conversation is longer than the model's context window, as
/// OpenAI (`context_length_exceeded`), Anthropic (`prompt is too long`), Gemini (`exceeds the maximum
/// number of tokens`) and Bedrock (`Input is too long`, `too many input tokens`) word it.
pub fn too_long(kind: Option<&str>, message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    kind == Some("context_length_exceeded")
        || [
            "prompt is too long",
            "maximum context length",
            "context length",
            "context window",
            "exceeds the maximum number of tokens",
            "input is too long",
            "too many input tokens",
            "too many tokens",
        ]
        .iter()
        .any(|phrase| message.contains(phrase))
}

/// The [`ModelError`] of an error answer: its status, its headers and its body (not yet redacted).
/// 408, 429 and 5xx (Anthropic's 529 included) are transient, and so are other statuses but 401, 403,
/// 404 and 413 whose kind is one of [`transient_kind`]; transient ones carry the wait of
/// `retry-after(-ms)` or of the body's `RetryInfo`. The rest is fatal: a 400 saying the conversation
/// is too long, 413 (a request too large), 401 and 403 (a refused key), 404 (an unknown model or path).
pub fn answer_error(status: u16, headers: &HeaderMap, body: &str) -> ModelError {
    let mut said = provider_error(body);
    if said.kind.is_none() {
        // Bedrock: `x-amzn-ErrorType: ThrottlingException:http://internal.amazon.com/coral/...`.
        said.kind = headers
            .get("x-amzn-errortype")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.split(':').next().unwrap_or(v).to_string());
    }
    let text: String = said
        .message
        .clone()
        .unwrap_or_else(|| body.trim().chars().take(MAX_MESSAGE_CHARS).collect())
        .chars()
        .take(MAX_MESSAGE_CHARS)
        .collect();
    // `429 (rate_limit_error)`, or `429` when the provider names no kind.
    let answered = match said.kind.as_deref() {
        Some(kind) => format!("{status} ({kind})"),
        None => status.to_string(),
    };
    // The status decides; a kind that means "later" only turns the statuses that say nothing of a
    // refused key or an unknown model transient (Bedrock's `ModelNotReadyException`, say).
    let transient = matches!(status, 408 | 429 | 500..=599)
        || (!matches!(status, 401 | 403 | 404 | 413) && said.kind.as_deref().is_some_and(transient_kind));
    if transient {
        let retry_after = retry_after(headers, jiff::Timestamp::now()).or(said.retry_delay);
        return ModelError::Transient {
            message: format!("the model endpoint answered {answered}: {text}"),
            retry_after,
        };
    }
    let message = match status {
        400 | 413 if too_long(said.kind.as_deref(), &text) => {
            format!(
                "the conversation is longer than the model's context window; the model endpoint answered {answered}: {text}"
            )
        }
        413 => format!("the request is larger than the model endpoint accepts; it answered {answered}: {text}"),
        401 | 403 => format!("the model endpoint refused the credentials; it answered {answered}: {text}"),
        404 => format!("the model endpoint knows no such model or path; it answered {answered}: {text}"),
        _ => format!("the model endpoint answered {answered}: {text}"),
    };
    ModelError::Fatal(message)
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderName, HeaderValue};

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(n, v)| (HeaderName::from_static(n), HeaderValue::from_str(v).expect("value"))).collect()
    }

    #[test]
    fn each_providers_error_shape_is_read() {
        let openai = r#"{"error": {"message": "This model's maximum context length is 128000 tokens", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#;
        let said = provider_error(openai);
        assert_eq!(said.kind.as_deref(), Some("invalid_request_error"));
        let anthropic = r#"{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}, "request_id": "req_1"}"#;
        assert_eq!(provider_error(anthropic).kind.as_deref(), Some("overloaded_error"));
        let gemini = r#"[{"error": {"code": 429, "message": "Quota exceeded", "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "37s"}]}}]"#;
        let said = provider_error(gemini);
        assert_eq!(said.kind.as_deref(), Some("RESOURCE_EXHAUSTED"));
        assert_eq!(said.retry_delay, Some(Duration::from_secs(37)));
        let bedrock = r#"{"message": "Too many requests, please wait before trying again."}"#;
        assert_eq!(
            provider_error(bedrock).message.as_deref(),
            Some("Too many requests, please wait before trying again.")
        );
        assert_eq!(provider_error("<html>bad gateway</html>"), ProviderError::default());
    }

    #[test]
    fn statuses_and_kinds_are_classified() {
        let none = HeaderMap::new();
        let cases: [(u16, &str, bool); 9] = [
            (408, "", true),
            (429, "", true),
            (500, "", true),
            (529, r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#, true),
            (400, r#"{"message":"Model is not ready"}"#, false),
            (400, "", false),
            (401, "", false),
            (403, "", false),
            (404, "", false),
        ];
        for (status, body, transient) in cases {
            assert_eq!(answer_error(status, &none, body).is_transient(), transient, "{status} {body}");
        }
        let throttled = headers(&[(
            "x-amzn-errortype",
            "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
        )]);
        assert!(answer_error(400, &throttled, r#"{"message":"slow down"}"#).is_transient());
        let refused =
            answer_error(401, &none, r#"{"error":{"message":"invalid x-api-key","type":"authentication_error"}}"#);
        assert_eq!(
            refused.to_string(),
            "the model endpoint refused the credentials; it answered 401 (authentication_error): invalid x-api-key"
        );
    }

    #[test]
    fn a_conversation_too_long_is_fatal_and_says_so() {
        let bodies = [
            r#"{"error": {"message": "This model's maximum context length is 128000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}}"#,
            r#"{"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 210000 tokens > 200000 maximum"}}"#,
            r#"{"error": {"code": 400, "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", "status": "INVALID_ARGUMENT"}}"#,
            r#"{"message": "Input is too long for requested model."}"#,
        ];
        for body in bodies {
            let error = answer_error(400, &HeaderMap::new(), body);
            assert!(!error.is_transient(), "{body}");
            assert!(
                error.to_string().starts_with("the conversation is longer than the model's context window"),
                "{error}"
            );
        }
    }

    #[test]
    fn the_wait_asked_for_is_read_from_headers_or_body() {
        let now = jiff::Timestamp::from_second(1_445_412_480).expect("time"); // Wed, 21 Oct 2015 07:28:00 GMT
        assert_eq!(retry_after(&headers(&[("retry-after", "7")]), now), Some(Duration::from_secs(7)));
        assert_eq!(retry_after(&headers(&[("retry-after", "1.5")]), now), Some(Duration::from_millis(1500)));
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "250"), ("retry-after", "1")]), now),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "Wed, 21 Oct 2015 07:28:30 GMT")]), now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "Wed, 21 Oct 2015 07:27:00 GMT")]), now),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-3")]), now), None);
        let gemini = r#"{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "2.5s"}]}}"#;
        assert_eq!(answer_error(429, &HeaderMap::new(), gemini).retry_after(), Some(Duration::from_millis(2500)));
    }
}
