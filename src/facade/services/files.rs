//! File names a user gives, made safe to keep: one path segment, never one that climbs out or hides
//! ([`safe_name`]). Used by the attachments and by knowledge base document uploads.

/// The longest file name, in characters.
pub const MAX_NAME_CHARS: usize = 200;

/// `name` as a file name that is one safe path segment: letters and digits of any script, `.`, `_`, `-`
/// kept (other
/// characters become `_`), no leading dot, at most [`MAX_NAME_CHARS`]; `None` when nothing is left.
pub fn safe_name(name: &str) -> Option<String> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    let cleaned: String = base
        .chars()
        .map(|c| if c.is_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
        .take(MAX_NAME_CHARS)
        .collect();
    let cleaned = cleaned.trim_start_matches('.').to_string();
    (!cleaned.is_empty() && cleaned.chars().any(char::is_alphanumeric)).then_some(cleaned)
}

#[cfg(test)]
mod tests {
    use super::safe_name;

    #[test]
    fn a_file_name_becomes_one_safe_segment_or_nothing() {
        assert_eq!(safe_name("report.pdf").as_deref(), Some("report.pdf"));
        assert_eq!(safe_name("../../etc/passwd").as_deref(), Some("passwd"));
        assert_eq!(safe_name("C:\\x\\a b.txt").as_deref(), Some("a_b.txt"));
        assert_eq!(safe_name(".bashrc").as_deref(), Some("bashrc"));
        assert_eq!(safe_name("研究.md").as_deref(), Some("研究.md"));
        assert_eq!(safe_name("..").as_deref(), None);
        assert_eq!(safe_name("").as_deref(), None);
    }
}
