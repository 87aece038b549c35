//! How a user's file is answered, as Yuxi's viewer reads it: a preview ([`preview`]: text, Markdown and
//! HTML as JSON `{content, preview_type, supported, message, truncated, limit}`; images and PDFs as their
//! bytes with `X-Yuxi-Preview-Type`; anything else `{supported: false}`), or the file itself
//! ([`download`], streamed). Bounds: a preview reads at most [`MAX_PREVIEW_BYTES`] and shows at most
//! [`MAX_TEXT_PREVIEW_CHARS`] characters of text; a download sends at most [`MAX_DOWNLOAD_BYTES`]. A file
//! past a bound answers 413 naming it (`max_preview_bytes`, `max_download_bytes`).
//!
//! The bytes of a user's file are a run's work, so they are never taken for this site's own pages:
//! every answer that carries them has `X-Content-Type-Options: nosniff` and a `Content-Security-Policy`
//! that sandboxes them and lets them load nothing.

use std::io::Read;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::facade::http::error::ApiError;
use crate::facade::services::files::{extension, media_type};
use crate::facade::services::scope::{OpenedFile, blocking};

/// The largest file a preview reads, in bytes (8 MiB).
pub const MAX_PREVIEW_BYTES: u64 = 8 * 1024 * 1024;
/// The most characters of text a preview shows; more is cut and marked `truncated`.
pub const MAX_TEXT_PREVIEW_CHARS: usize = 250_000;
/// The largest file a download sends, in bytes (256 MiB).
pub const MAX_DOWNLOAD_BYTES: u64 = 256 * 1024 * 1024;

/// The policy of every answer carrying a user's bytes: shown sandboxed, loading nothing.
const SANDBOXED: &str = "sandbox; default-src 'none'; img-src 'self' data:; style-src 'unsafe-inline'";

/// A file's bytes, as the OpenAPI document states an answer that carries them.
#[derive(utoipa::ToSchema)]
#[schema(value_type = String, format = Binary)]
#[allow(dead_code)]
pub struct FileBytes(Vec<u8>);

/// A preview in JSON (Yuxi's `PreviewResult.payload()`).
#[derive(Serialize, utoipa::ToSchema)]
pub struct Preview {
    /// The text; `null` when the file cannot be shown as text.
    pub content: Option<String>,
    /// `markdown`, `html`, `text` or `unsupported` (images and PDFs come as their bytes).
    pub preview_type: &'static str,
    /// Whether the viewer can show it.
    pub supported: bool,
    /// Why it cannot be shown, for a person.
    pub message: Option<String>,
    /// Whether `content` was cut at `limit` characters.
    pub truncated: bool,
    /// The most characters `content` holds.
    pub limit: Option<usize>,
}

/// What a file is shown as, by its name's extension and its first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Image(&'static str),
    Pdf,
    Markdown,
    Html,
    Text,
    Unsupported,
}

fn kind_of(name: &str, head: &[u8]) -> Kind {
    let ext = extension(name);
    let image = match ext.as_str() {
        ".png" => Some("image/png"),
        ".jpg" | ".jpeg" => Some("image/jpeg"),
        ".gif" => Some("image/gif"),
        ".webp" => Some("image/webp"),
        ".bmp" => Some("image/bmp"),
        ".svg" => Some("image/svg+xml"),
        _ => None,
    };
    match ext.as_str() {
        _ if image.is_some() => Kind::Image(image.unwrap_or_default()),
        ".pdf" => Kind::Pdf,
        ".md" | ".markdown" | ".mdx" => Kind::Markdown,
        ".html" | ".htm" => Kind::Html,
        _ if head.starts_with(b"%PDF-") => Kind::Pdf,
        _ if head.starts_with(b"\x89PNG\r\n\x1a\n") => Kind::Image("image/png"),
        _ if head.starts_with(b"\xff\xd8\xff") => Kind::Image("image/jpeg"),
        _ if head.contains(&0) => Kind::Unsupported,
        _ => Kind::Text,
    }
}

/// `name` percent-encoded for `filename*=UTF-8''` (RFC 5987): unreserved characters kept.
fn encoded(name: &str) -> String {
    let mut out = String::new();
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The headers of an answer carrying the bytes of `name`: its media type, how to show it
/// (`inline` or `attachment`), and the sandbox.
fn bytes_headers(name: &str, media: &'static str, disposition: &str) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media));
    if let Ok(value) = HeaderValue::from_str(&format!("{disposition}; filename*=UTF-8''{}", encoded(name))) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(SANDBOXED));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("private, no-store"));
    headers
}

/// The preview of the file `opened`, named `name`. Errors: 413 naming `max_preview_bytes` for a file
/// larger than [`MAX_PREVIEW_BYTES`]; 503 when it cannot be read.
pub async fn preview(opened: OpenedFile, name: &str) -> Result<Response, ApiError> {
    if opened.len > MAX_PREVIEW_BYTES {
        return Err(ApiError::TooLarge(format!(
            "max_preview_bytes: {name:?} has {} bytes, more than a preview reads ({MAX_PREVIEW_BYTES}); download it",
            opened.len
        )));
    }
    let bytes = blocking(move || {
        let mut bytes = Vec::new();
        opened.file.take(MAX_PREVIEW_BYTES).read_to_end(&mut bytes).map_err(|e| {
            tracing::error!(error = %e, "a user's file cannot be read");
            ApiError::Unavailable("the file cannot be read".into())
        })?;
        Ok(bytes)
    })
    .await?;
    let kind = kind_of(name, &bytes[..bytes.len().min(1024)]);
    let (media, preview_type) = match kind {
        Kind::Image(media) => (media, "image"),
        Kind::Pdf => ("application/pdf", "pdf"),
        Kind::Markdown | Kind::Html | Kind::Text => match String::from_utf8(bytes) {
            Ok(text) => return Ok(axum::Json(text_preview(kind, text)).into_response()),
            Err(_) => return Ok(axum::Json(unsupported("the file is not UTF-8 text; download it")).into_response()),
        },
        Kind::Unsupported => {
            return Ok(axum::Json(unsupported("this kind of file cannot be previewed; download it")).into_response());
        }
    };
    let mut headers = bytes_headers(name, media, "inline");
    headers.insert("x-yuxi-preview-type", HeaderValue::from_static(preview_type));
    if let Ok(value) = HeaderValue::from_str(&encoded(name)) {
        headers.insert("x-yuxi-preview-filename", value);
    }
    Ok((headers, bytes).into_response())
}

fn text_preview(kind: Kind, text: String) -> Preview {
    let truncated = text.chars().count() > MAX_TEXT_PREVIEW_CHARS;
    let content = if truncated { text.chars().take(MAX_TEXT_PREVIEW_CHARS).collect() } else { text };
    Preview {
        content: Some(content),
        preview_type: match kind {
            Kind::Markdown => "markdown",
            Kind::Html => "html",
            _ => "text",
        },
        supported: true,
        message: None,
        truncated,
        limit: Some(MAX_TEXT_PREVIEW_CHARS),
    }
}

fn unsupported(message: &str) -> Preview {
    Preview {
        content: None,
        preview_type: "unsupported",
        supported: false,
        message: Some(message.to_string()),
        truncated: false,
        limit: None,
    }
}

/// The file `opened`, named `name`, as an attachment, streamed. Errors: 413 naming `max_download_bytes`
/// for a file larger than [`MAX_DOWNLOAD_BYTES`].
pub fn download(opened: OpenedFile, name: &str) -> Result<Response, ApiError> {
    if opened.len > MAX_DOWNLOAD_BYTES {
        return Err(ApiError::TooLarge(format!(
            "max_download_bytes: {name:?} has {} bytes, more than a download sends ({MAX_DOWNLOAD_BYTES})",
            opened.len
        )));
    }
    let mut headers = bytes_headers(name, media_type(name), "attachment");
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(opened.len));
    // The length said is the length sent: a file that grows meanwhile is cut there.
    let file = tokio::io::AsyncReadExt::take(tokio::fs::File::from_std(opened.file), opened.len);
    let chunks = futures::stream::unfold(file, |mut file| async move {
        let mut chunk = vec![0u8; 64 * 1024];
        match tokio::io::AsyncReadExt::read(&mut file, &mut chunk).await {
            Ok(0) => None,
            Ok(n) => {
                chunk.truncate(n);
                Some((Ok::<_, std::io::Error>(axum::body::Bytes::from(chunk)), file))
            }
            Err(err) => Some((Err(err), file)),
        }
    });
    Ok((headers, Body::from_stream(chunks)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_shown_by_its_extension_then_by_its_first_bytes() {
        assert_eq!(kind_of("report.md", b"# R"), Kind::Markdown);
        assert_eq!(kind_of("page.HTML", b"<p>"), Kind::Html);
        assert_eq!(kind_of("chart.png", b""), Kind::Image("image/png"));
        assert_eq!(kind_of("noext", b"%PDF-1.7"), Kind::Pdf);
        assert_eq!(kind_of("data.bin", b"\x00\x01"), Kind::Unsupported);
        assert_eq!(kind_of("notes", b"plain words"), Kind::Text);
        assert_eq!(media_type("a.tar"), "application/octet-stream");
        assert_eq!(encoded("研究 report.md"), "%E7%A0%94%E7%A9%B6%20report.md");
    }

    #[test]
    fn a_long_text_is_cut_and_marked() {
        let long = "x".repeat(MAX_TEXT_PREVIEW_CHARS + 5);
        let preview = text_preview(Kind::Text, long);
        assert!(preview.truncated);
        assert_eq!(preview.content.map(|c| c.len()), Some(MAX_TEXT_PREVIEW_CHARS));
        assert!(!text_preview(Kind::Markdown, "# x".into()).truncated);
    }
}
