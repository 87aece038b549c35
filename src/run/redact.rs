//! Keeping secrets out of text that a person or a tracing backend reads: the secrets, longest first
//! (so a secret containing another is removed whole), and their replacement in a text.

/// What stands in a text for a secret removed from it.
pub const REDACTED: &str = "<redacted>";

/// `secrets` as [`redact`] wants them: those under `min_chars` characters left out (they would blank
/// common words), longest first.
pub fn longest_first(mut secrets: Vec<String>, min_chars: usize) -> Vec<String> {
    secrets.retain(|secret| secret.chars().count() >= min_chars);
    secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    secrets
}

/// `text` with each of `secrets` (ordered by [`longest_first`]) replaced by [`REDACTED`].
pub fn redact(text: &str, secrets: &[String]) -> String {
    secrets.iter().fold(text.to_string(), |text, secret| text.replace(secret.as_str(), REDACTED))
}

/// `text` with the credential after each `Bearer ` (any case) replaced by [`REDACTED`].
pub fn redact_bearer(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut rest = 0;
    let mut from = 0;
    while let Some(found) = lower[from..].find("bearer ") {
        let start = from + found + "bearer ".len();
        let end =
            text[start..].find(|c: char| c.is_whitespace() || c == '"' || c == '\\').map_or(text.len(), |i| start + i);
        if end > start {
            out.push_str(&text[rest..start]);
            out.push_str(REDACTED);
            rest = end;
        }
        from = end.max(start);
    }
    out.push_str(&text[rest..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_containing_another_is_removed_whole() {
        let secrets = longest_first(vec!["abcdefgh".into(), "abcdefgh-longer".into(), "abc".into()], 4);
        assert_eq!(secrets, ["abcdefgh-longer", "abcdefgh"]);
        assert_eq!(redact("key abcdefgh-longer and abcdefgh, abc", &secrets), "key <redacted> and <redacted>, abc");
    }

    #[test]
    fn bearer_credentials_are_redacted_and_the_rest_is_kept() {
        assert_eq!(redact_bearer("Authorization: Bearer abc.def-123 ok"), "Authorization: Bearer <redacted> ok");
        assert_eq!(redact_bearer("{\"h\": \"bearer xyz\"}"), "{\"h\": \"bearer <redacted>\"}");
        assert_eq!(redact_bearer("no credential, bearer  twice"), "no credential, bearer  twice");
        assert_eq!(redact_bearer("Bearer"), "Bearer");
    }
}
