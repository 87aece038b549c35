//! The HTTP headers (bearer tokens, API keys) the runner sends to the MCP servers agents use
//! (`headers:` of a server in the MCP server configuration; docs/concepts/mcp.md#authenticating-to-mcp-servers).
//!
//! Each header's value comes from exactly one place: `value` (for what is not secret), `env` (an
//! environment variable of the runner), `file` (a file the runner reads, such as a mounted Secret),
//! in a cluster `secretKeyRef` (a key of a Secret of the run's namespace), or `caller` (a token of the
//! run's own user for the server's audience, which the runner asks of the facade with its run token:
//! exchanged at the OIDC issuer, RFC 8693, or the user's own token when it is for that audience). The controller turns each
//! `secretKeyRef` into an environment variable of the runner container only ([`for_pod`]), never of
//! the sandbox container, so code the model runs cannot read it; in the local mode, `execute` runs with
//! an empty environment and the header files hidden. `prefix` is put before the value (`Bearer `).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// One header's value source.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HeaderSource {
    /// The value itself (for headers that are not secret).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// An environment variable of the runner holding it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// A file holding it (its text, trimmed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// A key of a Secret of the run's namespace (in a cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_key_ref: Option<SecretKey>,
    /// A token of the run's user for the server (`POST /api/tools/caller-token` of the facade).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller: Option<CallerToken>,
    /// Put before the value, such as `Bearer `.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// A key of a Secret.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretKey {
    /// The Secret.
    pub name: String,
    /// The key.
    pub key: String,
}

/// A token of the run's user for one audience.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallerToken {
    /// The audience the server accepts tokens for (its `aud`).
    pub audience: String,
}

/// Headers by name.
pub type Headers = BTreeMap<String, HeaderSource>;

/// Headers the MCP transport sets itself, which a configuration may not set.
const RESERVED: [&str; 4] = ["accept", "mcp-session-id", "mcp-protocol-version", "last-event-id"];

/// Why a header cannot be sent.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("header {header:?}: {message}")]
pub struct HeaderError {
    /// The header.
    pub header: String,
    /// What is wrong.
    pub message: String,
}

/// Checks the shape of `headers`: valid names, not one the transport sets, one source each.
///
/// Errors: [`HeaderError`] naming the header.
pub fn check(headers: &Headers) -> Result<(), HeaderError> {
    for (name, source) in headers {
        let bad = |message: &str| HeaderError { header: name.clone(), message: message.into() };
        let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
        if name.is_empty() || !name.chars().all(token) {
            return Err(bad("is not a header name"));
        }
        if RESERVED.contains(&name.to_ascii_lowercase().as_str()) {
            return Err(bad("is set by the MCP transport itself"));
        }
        let sources = [
            source.value.is_some(),
            source.env.is_some(),
            source.file.is_some(),
            source.secret_key_ref.is_some(),
            source.caller.is_some(),
        ];
        if sources.iter().filter(|s| **s).count() != 1 {
            return Err(bad("set exactly one of value, env, file, secretKeyRef and caller"));
        }
        if source.caller.as_ref().is_some_and(|c| c.audience.trim().is_empty() || c.audience.len() > 256) {
            return Err(bad("caller.audience: name the audience (1 to 256 characters)"));
        }
    }
    Ok(())
}

/// The value of `source` as the runner reads it: the prefix and the value, from the value itself,
/// the environment or the file; `caller` is the token the facade gave for it.
///
/// Errors: the variable is unset, the file cannot be read, the value is not a valid header value, it
/// is a `secretKeyRef` (which the controller turns into a variable; the local mode has none), or a
/// `caller` without a token.
pub fn resolve(name: &str, source: &HeaderSource, caller: Option<&str>) -> Result<String, HeaderError> {
    let bad = |message: String| HeaderError { header: name.to_string(), message };
    let value = if source.caller.is_some() {
        caller
            .ok_or_else(|| bad("the run's user's token comes from the facade, which this run cannot reach".into()))?
            .to_string()
    } else if let Some(value) = &source.value {
        value.clone()
    } else if let Some(var) = &source.env {
        std::env::var(var).map_err(|_| bad(format!("the environment variable {var} is not set")))?
    } else if let Some(file) = &source.file {
        std::fs::read_to_string(file)
            .map_err(|e| bad(format!("cannot read {}: {e}", file.display())))?
            .trim()
            .to_string()
    } else {
        return Err(bad("a secretKeyRef is read in a cluster only; locally, use env or file".into()));
    };
    let value = format!("{}{value}", source.prefix.as_deref().unwrap_or_default());
    if value.chars().any(|c| c.is_control()) {
        return Err(bad("its value holds control characters".into()));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(yaml: &str) -> HeaderSource {
        serde_norway::from_str(yaml).expect("a header source")
    }

    #[test]
    fn a_header_has_one_source_and_a_name_the_transport_does_not_set() {
        let one = |name: &str, yaml: &str| check(&Headers::from([(name.to_string(), source(yaml))]));
        assert_eq!(one("Authorization", "{env: TOKEN, prefix: 'Bearer '}"), Ok(()));
        assert!(one("X-Api-Key", "{env: A, file: /b}").is_err_and(|e| e.message.contains("exactly one")));
        assert!(one("X-Api-Key", "{}").is_err_and(|e| e.message.contains("exactly one")));
        assert!(one("Mcp-Session-Id", "{value: x}").is_err_and(|e| e.message.contains("transport")));
        assert!(one("Bad Name", "{value: x}").is_err_and(|e| e.message.contains("not a header name")));
        assert_eq!(one("Authorization", "{caller: {audience: notes}, prefix: 'Bearer '}"), Ok(()));
        assert!(one("Authorization", "{caller: {audience: ''}}").is_err_and(|e| e.message.contains("caller.audience")));
        assert!(
            one("Authorization", "{caller: {audience: a}, env: B}").is_err_and(|e| e.message.contains("exactly one"))
        );
    }

    #[test]
    fn a_caller_header_is_the_facades_token_or_an_error() {
        let caller = HeaderSource {
            caller: Some(CallerToken { audience: "notes".into() }),
            prefix: Some("Bearer ".into()),
            ..HeaderSource::default()
        };
        assert_eq!(resolve("Authorization", &caller, Some("ey.x.y")), Ok("Bearer ey.x.y".into()));
        assert!(resolve("Authorization", &caller, None).is_err_and(|e| e.message.contains("facade")));
    }

    #[test]
    fn values_are_read_from_where_they_are_with_their_prefix() {
        let dir = tempfile::TempDir::new().expect("dir");
        let file = dir.path().join("token");
        std::fs::write(&file, "s3cret\n").expect("write");
        let from_file = HeaderSource { file: Some(file), prefix: Some("Bearer ".into()), ..HeaderSource::default() };
        assert_eq!(resolve("Authorization", &from_file, None), Ok("Bearer s3cret".into()));
        let unset = HeaderSource { env: Some("YUXI_TEST_NO_SUCH_VARIABLE".into()), ..HeaderSource::default() };
        assert!(resolve("X", &unset, None).is_err_and(|e| e.message.contains("YUXI_TEST_NO_SUCH_VARIABLE")));
        let injected = HeaderSource { value: Some("a\r\nHost: evil".into()), ..HeaderSource::default() };
        assert!(resolve("X", &injected, None).is_err());
    }
}
