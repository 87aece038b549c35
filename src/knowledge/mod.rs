//! Knowledge bases: documents turned into passages that a run can search.
//!
//! A document is read into text ([`extract`]: Markdown, plain text, HTML, PDF), cut into passages that
//! keep their source and position ([`chunk`]), and indexed for full-text search with BM25
//! ([`index`]: tantivy, with jieba's segmentation so Chinese and English are both searched by word).
//!
//! This layer sits beside the run store: it keeps files (the index of each knowledge base, under a data
//! folder or on a volume), uses no HTTP server and no Kubernetes client, and is used by the role that
//! serves searches.

pub mod analyzer;
pub mod chunk;
pub mod embeddings;
pub mod extract;
pub mod held;
mod html;
pub mod hybrid;
pub mod index;
pub mod isolated;
pub mod mcp;
mod pdf;
mod pdf_forms;
mod pdf_streams;
#[cfg(test)]
mod test_pdf;
pub mod vectors;

use sha2::Digest;

/// A document read and cut, ready to index: what [`index::KnowledgeIndex::put_document`] takes.
#[derive(Clone, Debug)]
pub struct Prepared {
    /// Its kind, from its name's extension.
    pub kind: extract::DocumentKind,
    /// The SHA-256 of its bytes, as 64 hex digits.
    pub content_hash: String,
    /// Its passages.
    pub passages: Vec<chunk::Passage>,
}

/// Reads the document `name` with contents `bytes` for `reader` (the uploading user, or
/// [`isolated::SOURCES_READER`]; [`isolated::Places`]) and cuts it into passages (Markdown by headings,
/// other kinds by paragraphs).
///
/// Errors: [`extract::ExtractError`]: an unknown kind, more than [`extract::MAX_DOCUMENT_BYTES`], not
/// UTF-8, an unreadable HTML or PDF, no text, or more passages than [`chunk::MAX_PASSAGES`] or
/// [`chunk::MAX_PASSAGE_BYTES`] allow, or `reader`'s documents waiting to be read already.
pub fn prepare(reader: isolated::ReaderKey<'_>, name: &str, bytes: &[u8]) -> Result<Prepared, extract::ExtractError> {
    let (kind, text) = isolated::read(reader, name, bytes)?;
    let passages = chunk::passages(&text, kind == extract::DocumentKind::Markdown)?;
    if passages.is_empty() {
        return Err(extract::ExtractError::Empty);
    }
    Ok(Prepared { kind, content_hash: content_hash(bytes), passages })
}

/// The SHA-256 of `bytes`, as 64 lower-case hex digits: what re-indexing compares.
pub fn content_hash(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}
