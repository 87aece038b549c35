//! Knowledge bases: documents turned into passages that a run can search.
//!
//! A document is read into text ([`extract`]: Markdown, plain text, HTML, PDF), cut into passages that
//! keep their source and position ([`chunk`]), and indexed for full-text search with BM25
//! ([`index`]: tantivy, with jieba's segmentation so Chinese and English are both searched by word).
//!
//! This layer sits beside the run store: it keeps files (the index of each knowledge base, under a data
//! folder or on a volume), uses no HTTP server and no Kubernetes client, and is used by the role that
//! serves searches.

pub mod chunk;
pub mod extract;
pub mod index;
