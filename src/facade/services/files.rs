//! File names a user gives, made safe to keep: one path segment, never one that climbs out or hides
//! ([`safe_name`]), and the media type a file is sent as ([`media_type`]). Used by the attachments, the
//! file downloads, the A2A artifacts and knowledge base document uploads.

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

/// The extension of `name`, lower case with its dot (`.md`); empty when it has none (or is a dot file).
pub fn extension(name: &str) -> String {
    match name.rfind('.') {
        Some(at) if at > 0 => name[at..].to_ascii_lowercase(),
        _ => String::new(),
    }
}

/// The media type a download of `name` is sent as.
pub fn media_type(name: &str) -> &'static str {
    match extension(name).as_str() {
        ".md" | ".markdown" | ".mdx" => "text/markdown; charset=utf-8",
        ".txt" | ".log" | ".py" | ".yaml" | ".yml" | ".toml" | ".sh" => "text/plain; charset=utf-8",
        ".csv" => "text/csv; charset=utf-8",
        ".json" => "application/json",
        ".html" | ".htm" => "text/html; charset=utf-8",
        ".xml" => "application/xml",
        ".pdf" => "application/pdf",
        ".png" => "image/png",
        ".jpg" | ".jpeg" => "image/jpeg",
        ".gif" => "image/gif",
        ".webp" => "image/webp",
        ".svg" => "image/svg+xml",
        ".zip" => "application/zip",
        ".docx" => "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        ".xlsx" => "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        ".pptx" => "application/vnd.openxmlformats-officedocument.presentationml.presentation",
        _ => "application/octet-stream",
    }
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
