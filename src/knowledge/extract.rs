//! Reading a document into plain text, by the kind its name gives.

use std::fmt;

/// The largest document read, in bytes (8 MiB): a bigger one is refused before it is parsed.
pub const MAX_DOCUMENT_BYTES: usize = 8 * 1024 * 1024;

/// The kinds of document a knowledge base indexes, known by the name's extension (case-insensitive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocumentKind {
    /// `.md`, `.markdown`: kept as written; headings name the passages under them.
    Markdown,
    /// `.txt`, `.text`: kept as written.
    Text,
    /// `.html`, `.htm`: the text a reader sees, without tags, scripts or styles.
    Html,
    /// `.pdf`: the text layer (a scanned PDF without one has no text and is refused as empty).
    Pdf,
}

/// The extensions of each kind, as the refusal of an unknown kind lists them.
pub const KNOWN_EXTENSIONS: &str = ".md, .markdown, .txt, .text, .html, .htm, .pdf";

impl DocumentKind {
    /// The kind of a document named `name`, by its extension; `None` for any other.
    pub fn of(name: &str) -> Option<Self> {
        let extension = name.rsplit_once('.')?.1.to_ascii_lowercase();
        match extension.as_str() {
            "md" | "markdown" => Some(Self::Markdown),
            "txt" | "text" => Some(Self::Text),
            "html" | "htm" => Some(Self::Html),
            "pdf" => Some(Self::Pdf),
            _ => None,
        }
    }
}

/// Why a document could not be read. Each names what the person uploading it can change.
#[derive(Debug, PartialEq, Eq)]
pub enum ExtractError {
    /// The name has no extension of a known kind.
    UnknownKind {
        /// The document's name.
        name: String,
    },
    /// Larger than [`MAX_DOCUMENT_BYTES`].
    TooLarge {
        /// Its size, in bytes.
        bytes: usize,
    },
    /// A text kind whose bytes are not UTF-8.
    NotUtf8,
    /// The HTML or PDF could not be parsed.
    Unreadable(String),
    /// Nothing but white space once read (an empty file, a PDF without a text layer).
    Empty,
}

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownKind { name } => {
                write!(f, "{name:?} is not a kind of document indexed here ({KNOWN_EXTENSIONS})")
            }
            Self::TooLarge { bytes } => {
                write!(f, "the document has {bytes} bytes, more than max_document_bytes ({MAX_DOCUMENT_BYTES})")
            }
            Self::NotUtf8 => f.write_str("the document is not UTF-8 text"),
            Self::Unreadable(why) => write!(f, "the document cannot be read: {why}"),
            Self::Empty => f.write_str("the document has no text"),
        }
    }
}

impl std::error::Error for ExtractError {}

/// The text of the document `name` with contents `bytes`.
///
/// Errors: [`ExtractError`]: an unknown kind, too large, not UTF-8, an unreadable PDF, or no text.
pub fn extract(name: &str, bytes: &[u8]) -> Result<(DocumentKind, String), ExtractError> {
    let kind = DocumentKind::of(name).ok_or_else(|| ExtractError::UnknownKind { name: name.to_string() })?;
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(ExtractError::TooLarge { bytes: bytes.len() });
    }
    let text = match kind {
        DocumentKind::Markdown | DocumentKind::Text => {
            std::str::from_utf8(bytes).map_err(|_| ExtractError::NotUtf8)?.to_string()
        }
        DocumentKind::Html => {
            let source = std::str::from_utf8(bytes).map_err(|_| ExtractError::NotUtf8)?;
            check_html_shape(source)?;
            // A very wide rendering keeps paragraphs on one line, so the chunker sees them whole.
            html2text::config::plain_no_decorate()
                .string_from_read(source.as_bytes(), 10_000)
                .map_err(|err| ExtractError::Unreadable(err.to_string()))?
        }
        DocumentKind::Pdf => pdf_text(bytes)?,
    };
    let text = text.replace("\r\n", "\n");
    if text.trim().is_empty() {
        return Err(ExtractError::Empty);
    }
    Ok((kind, text))
}

/// The most elements an HTML document may have, and how deep they may nest: the renderer's time and
/// memory grow faster than the document past these (a page of text has a few thousand elements).
pub const MAX_HTML_ELEMENTS: usize = 20_000;
/// See [`MAX_HTML_ELEMENTS`].
pub const MAX_HTML_DEPTH: usize = 256;

/// Refuses HTML with more than [`MAX_HTML_ELEMENTS`] tags or nested deeper than [`MAX_HTML_DEPTH`],
/// judged by a linear scan of its tags before it is parsed.
fn check_html_shape(source: &str) -> Result<(), ExtractError> {
    const VOID: [&str; 14] =
        ["area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr", "param"];
    let (mut elements, mut depth, mut deepest) = (0usize, 0usize, 0usize);
    let mut rest = source;
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        let closing = rest.starts_with('/');
        let name: String = rest
            .trim_start_matches('/')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .collect();
        if name.is_empty() {
            continue;
        }
        let self_closing = rest.find('>').is_some_and(|end| rest[..end].ends_with('/'));
        if closing {
            depth = depth.saturating_sub(1);
        } else {
            elements += 1;
            if !VOID.contains(&name.as_str()) && !self_closing {
                depth += 1;
                deepest = deepest.max(depth);
            }
        }
    }
    if elements > MAX_HTML_ELEMENTS || deepest > MAX_HTML_DEPTH {
        return Err(ExtractError::Unreadable(format!(
            "the HTML has {elements} elements nested {deepest} deep; at most {MAX_HTML_ELEMENTS} elements nested {MAX_HTML_DEPTH} deep are read"
        )));
    }
    Ok(())
}

/// The text layer of a PDF. The parser panics on some malformed files, so a panic is caught and
/// answered as an unreadable PDF.
fn pdf_text(bytes: &[u8]) -> Result<String, ExtractError> {
    let owned = bytes.to_vec();
    match std::panic::catch_unwind(move || pdf_extract::extract_text_from_mem(&owned)) {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(err)) => Err(ExtractError::Unreadable(err.to_string())),
        Err(_) => Err(ExtractError::Unreadable("the PDF is malformed".to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_known_by_extension_whatever_the_case() {
        assert_eq!(DocumentKind::of("a/Guide.MD"), Some(DocumentKind::Markdown));
        assert_eq!(DocumentKind::of("notes.txt"), Some(DocumentKind::Text));
        assert_eq!(DocumentKind::of("page.htm"), Some(DocumentKind::Html));
        assert_eq!(DocumentKind::of("paper.pdf"), Some(DocumentKind::Pdf));
        assert_eq!(DocumentKind::of("run.sh"), None);
        assert_eq!(DocumentKind::of("README"), None);
    }

    #[test]
    fn html_is_read_as_the_text_a_reader_sees() {
        let html = b"<html><head><style>p{color:red}</style><script>alert(1)</script></head>\
            <body><h1>Title</h1><p>The <b>lease</b> is renewed.</p></body></html>";
        let (kind, text) = extract("page.html", html).expect("reads");
        assert_eq!(kind, DocumentKind::Html);
        assert!(text.contains("Title") && text.contains("The lease is renewed."), "{text}");
        assert!(!text.contains("alert") && !text.contains("color"), "{text}");
    }

    #[test]
    fn a_pdf_is_read_by_its_text_layer() {
        let pdf = include_bytes!("../../tests/fixtures/knowledge/lease-renewal.pdf");
        let (kind, text) = extract("lease-renewal.pdf", pdf).expect("reads");
        assert_eq!(kind, DocumentKind::Pdf);
        assert!(text.contains("renews its lease every ten seconds"), "{text}");
        assert!(text.contains("ends interrupted"), "{text}");
    }

    #[test]
    fn html_too_large_in_elements_or_depth_is_refused_before_it_is_rendered() {
        let deep = format!("{}hi{}", "<div>".repeat(MAX_HTML_DEPTH + 1), "</div>".repeat(MAX_HTML_DEPTH + 1));
        assert!(matches!(extract("d.html", deep.as_bytes()), Err(ExtractError::Unreadable(m)) if m.contains("nested")));
        let wide = format!("<table><tr>{}</tr></table>", "<td>x</td>".repeat(MAX_HTML_ELEMENTS));
        assert!(matches!(extract("w.html", wide.as_bytes()), Err(ExtractError::Unreadable(_))));
        // Siblings and void elements do not add depth.
        let long = format!("<body>{}</body>", "<p>a<br>b</p>".repeat(1000));
        assert!(extract("l.html", long.as_bytes()).is_ok());
    }

    #[test]
    fn bad_documents_are_refused_naming_why() {
        assert_eq!(extract("x.exe", b"MZ"), Err(ExtractError::UnknownKind { name: "x.exe".into() }));
        assert_eq!(extract("x.txt", b" \n\t"), Err(ExtractError::Empty));
        assert_eq!(extract("x.txt", &[0xff, 0xfe, 0x00]), Err(ExtractError::NotUtf8));
        assert!(matches!(extract("x.pdf", b"%PDF-1.4 not really"), Err(ExtractError::Unreadable(_))));
        let big = vec![b'a'; MAX_DOCUMENT_BYTES + 1];
        assert_eq!(extract("x.txt", &big), Err(ExtractError::TooLarge { bytes: MAX_DOCUMENT_BYTES + 1 }));
        assert!(ExtractError::TooLarge { bytes: 9 }.to_string().contains("max_document_bytes"));
    }
}
