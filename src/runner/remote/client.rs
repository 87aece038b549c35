//! The HTTP side of a remote A2A agent: its card, fetched with the Agent's headers and kept for the
//! card's time to live ([`card`]), the JSON-RPC interface the card names ([`Remote`]), a call
//! ([`Remote::call`]) and a streamed call ([`Remote::stream`]), each bounded in size and time.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use crate::delegation::a2a::rpc::result_of;
use crate::delegation::a2a::{JSONRPC_BINDING, VERSION_HEADER};
use crate::runner::model::sse::SseDecoder;

/// The largest card read, in bytes.
pub const MAX_CARD_BYTES: usize = 1024 * 1024;
/// The largest answer (or stream item) read, in bytes.
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// How long a card fetch or a call that does not stream may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Why the remote agent could not be used.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// It could not be reached, or answered with an HTTP error.
    #[error("{0}")]
    Unreachable(String),
    /// It answered something that is not A2A 1.0 JSON-RPC.
    #[error("{0}")]
    Invalid(String),
    /// It answered a JSON-RPC error.
    #[error("the remote agent refused {method}: {message} ({code})")]
    Refused {
        /// The method.
        method: String,
        /// The error code.
        code: i64,
        /// Its message.
        message: String,
    },
}

/// A remote agent's JSON-RPC interface, as its card names it.
#[derive(Clone, Debug)]
pub struct Remote {
    http: reqwest::Client,
    /// Where its requests go.
    pub url: String,
    /// Whether it streams (`capabilities.streaming`).
    pub streaming: bool,
}

/// The cards fetched by this process: URL → (when fetched, the card).
fn cards() -> &'static Mutex<HashMap<String, (Instant, Value)>> {
    static CARDS: OnceLock<Mutex<HashMap<String, (Instant, Value)>>> = OnceLock::new();
    CARDS.get_or_init(Mutex::default)
}

/// The client of the agent whose card is at `card_url`, sending `headers`: the card as fetched within
/// `ttl`, else fetched now. Errors: the card cannot be fetched, is not JSON, or names no A2A 1.x
/// JSON-RPC interface.
pub async fn card(card_url: &str, headers: HeaderMap, ttl: Duration) -> Result<Remote, RemoteError> {
    let http = reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(Duration::from_secs(10))
        // The headers (a credential) go to the card's origin alone: never on to where a redirect points.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| RemoteError::Unreachable(format!("cannot make the HTTP client: {e}")))?;
    let kept = cards()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(card_url)
        .filter(|(at, _)| at.elapsed() < ttl)
        .map(|(_, card)| card.clone());
    let card = match kept {
        Some(card) => card,
        None => {
            let response = http
                .get(card_url)
                .timeout(CALL_TIMEOUT)
                .send()
                .await
                .map_err(|e| RemoteError::Unreachable(format!("the card at {card_url} cannot be read: {e}")))?;
            let status = response.status();
            if !status.is_success() {
                return Err(RemoteError::Unreachable(format!("the card at {card_url} answered HTTP {status}")));
            }
            let bytes = read_bounded(response, MAX_CARD_BYTES).await?;
            let card: Value = serde_json::from_slice(&bytes)
                .map_err(|e| RemoteError::Invalid(format!("the card at {card_url} is not JSON: {e}")))?;
            cards()
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(card_url.to_string(), (Instant::now(), card.clone()));
            card
        }
    };
    let interface = card["supportedInterfaces"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| {
            i["protocolBinding"] == JSONRPC_BINDING
                && i["protocolVersion"].as_str().is_some_and(|v| v.starts_with("1."))
        })
        .and_then(|i| i["url"].as_str())
        .ok_or_else(|| RemoteError::Invalid(format!("the card at {card_url} names no A2A 1.x JSON-RPC interface")))?;
    // The card's own origin only: a card that names another host would have the Agent's headers (its
    // credential) sent there.
    if origin(interface).is_none() || origin(interface) != origin(card_url) {
        return Err(RemoteError::Invalid(format!(
            "the card at {card_url} names the interface {interface:?}, not a URL of the card's own origin"
        )));
    }
    let streaming = card["capabilities"]["streaming"].as_bool().unwrap_or(false);
    Ok(Remote { http, url: interface.to_string(), streaming })
}

/// The scheme, host and port of an http(s) `url` (the port as the scheme's default when absent).
fn origin(url: &str) -> Option<(String, String, u16)> {
    let url = reqwest::Url::parse(url).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    Some((url.scheme().to_string(), url.host_str()?.to_ascii_lowercase(), url.port_or_known_default()?))
}

/// The body of `response`, at most `max` bytes.
async fn read_bounded(mut response: reqwest::Response, max: usize) -> Result<Vec<u8>, RemoteError> {
    let mut bytes = Vec::new();
    while let Some(chunk) =
        response.chunk().await.map_err(|e| RemoteError::Unreachable(format!("the answer broke off: {e}")))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > max {
            return Err(RemoteError::Invalid(format!("the answer is larger than {max} bytes")));
        }
    }
    Ok(bytes)
}

/// The headers of every request: the protocol version, and the run's trace when it has one.
fn request_headers(traceparent: Option<&str>) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        HeaderName::from_static("a2a-version"),
        HeaderValue::from_static(crate::delegation::a2a::PROTOCOL_VERSION),
    );
    if let Some(value) = traceparent.and_then(|t| HeaderValue::from_str(t).ok()) {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
    debug_assert_eq!(VERSION_HEADER.to_ascii_lowercase(), "a2a-version");
    headers
}

impl Remote {
    /// Posts the request of `method` with `params`; the answer, when its status is a success. A
    /// `streaming` request asks for server-sent events and has no overall time limit (the run's own
    /// bounds it); another has [`CALL_TIMEOUT`].
    async fn post(
        &self,
        method: &str,
        params: Value,
        traceparent: Option<&str>,
        streaming: bool,
    ) -> Result<reqwest::Response, RemoteError> {
        let body =
            json!({"jsonrpc": "2.0", "id": uuid::Uuid::new_v4().to_string(), "method": method, "params": params});
        let request = self.http.post(&self.url).headers(request_headers(traceparent)).json(&body);
        let request = if streaming {
            request.header(reqwest::header::ACCEPT, "text/event-stream")
        } else {
            request.timeout(CALL_TIMEOUT)
        };
        let response = request
            .send()
            .await
            .map_err(|e| RemoteError::Unreachable(format!("{method} to {} failed: {e}", self.url)))?;
        let status = response.status();
        if !status.is_success() {
            return Err(RemoteError::Unreachable(format!("{method} to {} answered HTTP {status}", self.url)));
        }
        Ok(response)
    }

    /// Calls `method` with `params`; its result. Errors: unreachable, an HTTP error, not JSON-RPC, or
    /// the agent's JSON-RPC error.
    pub async fn call(&self, method: &str, params: Value, traceparent: Option<&str>) -> Result<Value, RemoteError> {
        let response = self.post(method, params, traceparent, false).await?;
        let answer: Value = serde_json::from_slice(&read_bounded(response, MAX_ANSWER_BYTES).await?)
            .map_err(|e| RemoteError::Invalid(format!("{method}: the answer is not JSON: {e}")))?;
        result_of(answer).map_err(|(code, message)| RemoteError::Refused { method: method.into(), code, message })
    }

    /// Calls the streaming `method` with `params`: its items, read with [`Items::next`]. Errors as
    /// [`Remote::call`].
    pub async fn stream(&self, method: &str, params: Value, traceparent: Option<&str>) -> Result<Items, RemoteError> {
        let response = self.post(method, params, traceparent, true).await?;
        Ok(Items {
            method: method.to_string(),
            response,
            decoder: SseDecoder::default(),
            ready: Default::default(),
            pending: 0,
        })
    }
}

/// The items of a stream, each the result of one server-sent event.
pub struct Items {
    method: String,
    response: reqwest::Response,
    decoder: SseDecoder,
    ready: std::collections::VecDeque<String>,
    pending: usize,
}

impl Items {
    /// The next item's result; `None` once the stream has ended. Errors: the stream broke off, an
    /// item past [`MAX_ANSWER_BYTES`] or not JSON, or the agent's JSON-RPC error.
    pub async fn next(&mut self) -> Result<Option<Value>, RemoteError> {
        let method = self.method.clone();
        loop {
            if let Some(data) = self.ready.pop_front() {
                let answer: Value = serde_json::from_str(&data)
                    .map_err(|e| RemoteError::Invalid(format!("{method}: a stream item is not JSON: {e}")))?;
                return result_of(answer).map(Some).map_err(|(code, message)| RemoteError::Refused {
                    method,
                    code,
                    message,
                });
            }
            let chunk = self
                .response
                .chunk()
                .await
                .map_err(|e| RemoteError::Unreachable(format!("{method}: the stream broke off: {e}")))?;
            let Some(chunk) = chunk else {
                return Ok(self
                    .decoder
                    .finish()
                    .map(|e| e.data)
                    .and_then(|d| serde_json::from_str::<Value>(&d).ok())
                    .and_then(|a| result_of(a).ok()));
            };
            self.pending += chunk.len();
            let events = self.decoder.push(&chunk);
            if events.is_empty() && self.pending > MAX_ANSWER_BYTES {
                return Err(RemoteError::Invalid(format!(
                    "{method}: a stream item is larger than {MAX_ANSWER_BYTES} bytes"
                )));
            }
            if !events.is_empty() {
                self.pending = 0;
            }
            self.ready.extend(events.into_iter().filter(|e| !e.data.is_empty()).map(|e| e.data));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::origin;

    #[test]
    fn an_interface_is_of_the_cards_origin_or_refused() {
        let card = origin("https://Agents.example.com/a2a/x/.well-known/agent-card.json");
        assert_eq!(card, origin("https://agents.example.com:443/a2a/x"));
        assert_ne!(card, origin("https://agents.example.com.evil.net/a2a/x"));
        assert_ne!(card, origin("http://agents.example.com/a2a/x"), "another scheme is another origin");
        assert_ne!(card, origin("https://agents.example.com:8443/a2a/x"));
        assert_eq!(origin("file:///etc/passwd"), None);
    }
}
