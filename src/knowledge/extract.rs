//! Reading a document into plain text, by the kind its name gives.

use std::fmt;

use super::pdf_streams::PdfError;

/// The largest document read, in bytes (8 MiB): a bigger one is refused before it is parsed.
pub const MAX_DOCUMENT_BYTES: usize = 8 * 1024 * 1024;

/// The kinds of document a knowledge base indexes, known by the name's extension (case-insensitive).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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

/// The most text read from one document, in bytes (8 MiB, as [`MAX_DOCUMENT_BYTES`]): a PDF's
/// compressed text can be far larger than its file.
pub const MAX_DOCUMENT_TEXT_BYTES: usize = MAX_DOCUMENT_BYTES;

pub use super::pdf::MAX_PDF_EXPANDED_BYTES;
pub use super::pdf_streams::MAX_PDF_PAGE_CONTENT_BYTES;

/// Why a document could not be read. Each names what the person uploading it can change.
#[derive(Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
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
    /// Its text is larger than [`MAX_DOCUMENT_TEXT_BYTES`].
    TooMuchText,
    /// A PDF whose compressed streams expand to more than [`MAX_PDF_EXPANDED_BYTES`].
    Expands,
    /// A PDF one of whose pages has content streams expanding to more than
    /// [`MAX_PDF_PAGE_CONTENT_BYTES`].
    PageExpands,
    /// A text kind whose bytes are not UTF-8.
    NotUtf8,
    /// The PDF could not be parsed.
    Unreadable(String),
    /// Nothing but white space once read (an empty file, a PDF without a text layer).
    Empty,
    /// Cut into more than [`super::chunk::MAX_PASSAGES`] passages.
    TooManyPassages,
    /// Its passages, texts and heading paths together, hold more than
    /// [`super::chunk::MAX_PASSAGE_BYTES`].
    PassagesTooLarge,
    /// The same reader (a user) has [`super::isolated::MAX_WAITING_PER_READER`] documents waiting to be
    /// read already (429 naming `max_document_readings_per_user`).
    ReadersBusy,
}

impl ExtractError {
    /// The limit a document passed, by its name in the limits reference (`max_document_bytes`,
    /// `max_document_text_bytes`, `max_pdf_expanded_bytes`, `max_pdf_page_content_bytes`,
    /// `max_passages_per_document`, `max_document_passage_bytes`, `max_document_readings_per_user`);
    /// `None` for the other errors.
    pub fn limit(&self) -> Option<&'static str> {
        match self {
            Self::TooLarge { .. } => Some("max_document_bytes"),
            Self::TooMuchText => Some("max_document_text_bytes"),
            Self::Expands => Some("max_pdf_expanded_bytes"),
            Self::PageExpands => Some("max_pdf_page_content_bytes"),
            Self::TooManyPassages => Some("max_passages_per_document"),
            Self::PassagesTooLarge => Some("max_document_passage_bytes"),
            Self::ReadersBusy => Some("max_document_readings_per_user"),
            _ => None,
        }
    }
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
            Self::TooMuchText => write!(
                f,
                "the document's text is longer than max_document_text_bytes ({MAX_DOCUMENT_TEXT_BYTES} bytes)"
            ),
            Self::Expands => write!(
                f,
                "the PDF's compressed streams expand to more than max_pdf_expanded_bytes ({MAX_PDF_EXPANDED_BYTES} bytes)"
            ),
            Self::PageExpands => write!(
                f,
                "a page of the PDF has content expanding to more than max_pdf_page_content_bytes ({MAX_PDF_PAGE_CONTENT_BYTES} bytes)"
            ),
            Self::NotUtf8 => f.write_str("the document is not UTF-8 text"),
            Self::Unreadable(why) => write!(f, "the document cannot be read: {why}"),
            Self::Empty => f.write_str("the document has no text"),
            Self::TooManyPassages => write!(
                f,
                "the document cuts into more than max_passages_per_document ({}) passages",
                super::chunk::MAX_PASSAGES
            ),
            Self::PassagesTooLarge => write!(
                f,
                "the document's passages with their headings hold more than max_document_passage_bytes ({} bytes)",
                super::chunk::MAX_PASSAGE_BYTES
            ),
            Self::ReadersBusy => write!(
                f,
                "{} of your documents are waiting to be read already (max_document_readings_per_user); try again when they are",
                super::isolated::MAX_WAITING_PER_READER
            ),
        }
    }
}

impl std::error::Error for ExtractError {}

/// The text of the document `name` with contents `bytes`.
///
/// Errors: [`ExtractError`]: an unknown kind, too large (as a file, as text, or as a PDF's expanded
/// streams), not UTF-8, an unreadable PDF, or no text.
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
            super::html::text(source, MAX_DOCUMENT_TEXT_BYTES).map_err(|_| ExtractError::TooMuchText)?
        }
        DocumentKind::Pdf => super::pdf::text(bytes, MAX_DOCUMENT_TEXT_BYTES).map_err(|err| match err {
            PdfError::Expands => ExtractError::Expands,
            PdfError::PageExpands => ExtractError::PageExpands,
            PdfError::TooMuchText => ExtractError::TooMuchText,
            PdfError::Unreadable(why) => ExtractError::Unreadable(why),
        })?,
    };
    let text = text.replace("\r\n", "\n");
    if text.trim().is_empty() {
        return Err(ExtractError::Empty);
    }
    Ok((kind, text))
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
    fn limits_are_named_by_the_errors_that_pass_them() {
        assert_eq!(ExtractError::TooLarge { bytes: 9 }.limit(), Some("max_document_bytes"));
        assert_eq!(ExtractError::TooMuchText.limit(), Some("max_document_text_bytes"));
        assert_eq!(ExtractError::Expands.limit(), Some("max_pdf_expanded_bytes"));
        assert_eq!(ExtractError::Empty.limit(), None);
        assert_eq!(ExtractError::PageExpands.limit(), Some("max_pdf_page_content_bytes"));
        for err in [ExtractError::TooMuchText, ExtractError::Expands, ExtractError::PageExpands] {
            assert!(err.to_string().contains(err.limit().unwrap()), "{err}");
        }
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
