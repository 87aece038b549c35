//! Knowledge bases backed by an external retrieval service: one tool of an MCP server (streamable HTTP,
//! the official Rust SDK), called with the query, its answer read as passages.
//!
//! A tool answers text. Each text item is read as JSON when it is JSON: a list of objects, or an object
//! with a `results`, `documents`, `passages` or `hits` list, each object's passage in `text`, `content`,
//! `page_content` or `chunk`, its document in `document`, `source`, `title`, `id` or `metadata.source`,
//! its score in `score`. Any other text item is one passage. At most `top_k` passages are kept.

use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Map, Value};

use super::index::Hit;
use crate::resources::knowledge_base::McpSource;

/// How long connecting, calling and answering may take together.
pub const MCP_SEARCH_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest passage kept from a service's answer, in characters.
const MAX_PASSAGE_CHARS: usize = 4000;

/// A search of an MCP-backed knowledge base failed; the message names the server and what it did.
#[derive(Debug, thiserror::Error)]
pub enum McpSearchError {
    /// The server could not be reached or refused the session (a bad token included).
    #[error("the retrieval service at {url} cannot be reached: {message}")]
    Unreachable {
        /// The server's URL.
        url: String,
        /// Why.
        message: String,
    },
    /// The server did not answer within [`MCP_SEARCH_TIMEOUT`].
    #[error("the retrieval service at {url} did not answer within {} s", MCP_SEARCH_TIMEOUT.as_secs())]
    Timeout {
        /// The server's URL.
        url: String,
    },
    /// The tool call failed, or the tool answered an error.
    #[error("the retrieval tool {tool:?} at {url} failed: {message}")]
    Failed {
        /// The server's URL.
        url: String,
        /// The tool.
        tool: String,
        /// The server's message.
        message: String,
    },
}

/// Asks `source`'s tool for `top_k` passages about `query`, with `token` as the bearer token when set
/// and the W3C `traceparent` of the search in the call's `_meta` when given.
///
/// Errors: [`McpSearchError`]: the server cannot be reached, is too slow, or the tool fails.
pub async fn search(
    source: &McpSource,
    token: Option<&str>,
    query: &str,
    top_k: usize,
    traceparent: Option<String>,
) -> Result<Vec<Hit>, McpSearchError> {
    let url = source.url.clone();
    tokio::time::timeout(MCP_SEARCH_TIMEOUT, call(source, token, query, top_k, traceparent))
        .await
        .map_err(|_| McpSearchError::Timeout { url })?
}

async fn call(
    source: &McpSource,
    token: Option<&str>,
    query: &str,
    top_k: usize,
    traceparent: Option<String>,
) -> Result<Vec<Hit>, McpSearchError> {
    crate::tls::install_crypto_provider();
    let mut config = StreamableHttpClientTransportConfig::with_uri(source.url.as_str());
    if let Some(token) = token {
        config = config.auth_header(token);
    }
    let client =
        ().serve(StreamableHttpClientTransport::from_config(config))
            .await
            .map_err(|e| McpSearchError::Unreachable { url: source.url.clone(), message: e.to_string() })?;
    let mut arguments = Map::new();
    arguments.insert(source.query_argument.clone().unwrap_or_else(|| "query".into()), Value::String(query.into()));
    if let Some(name) = &source.top_k_argument {
        arguments.insert(name.clone(), Value::from(top_k as u64));
    }
    let failed =
        |message: String| McpSearchError::Failed { url: source.url.clone(), tool: source.tool.clone(), message };
    let answer = client
        .call_tool(crate::run::trace::with_traceparent(
            CallToolRequestParams::new(source.tool.clone()).with_arguments(arguments),
            traceparent,
        ))
        .await
        .map_err(|e| failed(e.to_string()));
    let _ = client.cancel().await;
    let answer = answer?;
    let texts: Vec<String> = answer.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect();
    if answer.is_error == Some(true) {
        return Err(failed(texts.join(" ")));
    }
    let mut hits = Vec::new();
    for text in &texts {
        read_passages(text, &source.tool, &mut hits);
    }
    if hits.is_empty()
        && let Some(structured) = &answer.structured_content
    {
        collect(structured, &source.tool, &mut hits);
    }
    hits.truncate(top_k);
    Ok(hits)
}

/// The passages of one text item, appended to `hits`.
fn read_passages(text: &str, tool: &str, hits: &mut Vec<Hit>) {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ (Value::Array(_) | Value::Object(_))) if collect(&value, tool, hits) > 0 => {}
        _ if !text.trim().is_empty() => hits.push(hit(tool.to_string(), text, None, hits.len())),
        _ => {}
    }
}

/// Appends the passages found in a JSON answer; how many.
fn collect(value: &Value, tool: &str, hits: &mut Vec<Hit>) -> usize {
    let list = match value {
        Value::Array(items) => items.as_slice(),
        Value::Object(map) => match ["results", "documents", "passages", "hits"].iter().find_map(|k| map.get(*k)) {
            Some(Value::Array(items)) => items.as_slice(),
            _ => std::slice::from_ref(value),
        },
        _ => return 0,
    };
    let before = hits.len();
    for item in list {
        let field =
            |names: &[&str]| names.iter().find_map(|n| item.get(*n).and_then(Value::as_str)).map(str::to_string);
        let Some(text) = field(&["text", "content", "page_content", "chunk"]) else { continue };
        let document = field(&["document", "source", "title", "id"])
            .or_else(|| item.pointer("/metadata/source").and_then(Value::as_str).map(str::to_string))
            .unwrap_or_else(|| tool.to_string());
        let score = item.get("score").and_then(Value::as_f64).map(|s| s as f32);
        hits.push(hit(document, &text, score, hits.len()));
    }
    hits.len() - before
}

fn hit(document: String, text: &str, score: Option<f32>, position: usize) -> Hit {
    Hit {
        document,
        location: String::new(),
        position: position as u64,
        text: text.chars().take(MAX_PASSAGE_CHARS).collect(),
        // Without a score, the service's order: the first passage best.
        score: score.unwrap_or(1.0 / (position as f32 + 1.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_answer_is_read_as_its_passages_and_plain_text_as_one() {
        let mut hits = Vec::new();
        read_passages(
            r#"{"results": [{"content": "Leases are renewed.", "metadata": {"source": "ops.md"}, "score": 0.9}, {"text": "t2", "title": "b"}]}"#,
            "find",
            &mut hits,
        );
        assert_eq!(hits.len(), 2);
        assert_eq!(
            (hits[0].document.as_str(), hits[0].text.as_str(), hits[0].score),
            ("ops.md", "Leases are renewed.", 0.9)
        );
        assert_eq!(hits[1].document, "b");
        read_passages("just words", "find", &mut hits);
        assert_eq!((hits[2].document.as_str(), hits[2].text.as_str()), ("find", "just words"));
        read_passages("  ", "find", &mut hits);
        assert_eq!(hits.len(), 3);
    }
}
