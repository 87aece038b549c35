//! What a search of a knowledge base answers, through `/api/knowledge/{slug}/search` or the runs'
//! `knowledge_search`: the check of its query ([`check_search`]) and its passages ([`passages`]).

use serde::Serialize;

use super::{MAX_QUERY_CHARS, MAX_TOP_K};
use crate::facade::http::error::ApiError;
use crate::knowledge::index::Hit;

/// One passage found.
#[derive(Serialize, utoipa::ToSchema)]
pub struct Passage {
    /// The knowledge base it is from.
    pub knowledge_base: String,
    /// The document.
    pub document: String,
    /// Where in the document (`Leases › Renewal, lines 12-20`), or empty for a service's passage.
    pub location: String,
    /// Its text.
    pub text: String,
    /// Its score; higher is better, comparable within one knowledge base.
    pub score: f32,
}

/// Checks a query and `top_k` (default 5). Errors: 422 naming `query` or `top_k`.
pub fn check_search(query: &str, top_k: Option<u32>) -> Result<usize, ApiError> {
    if query.trim().is_empty() {
        return Err(ApiError::invalid("query", "is empty"));
    }
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(ApiError::invalid("query", format!("is longer than {MAX_QUERY_CHARS} characters")));
    }
    match top_k {
        None => Ok(5),
        Some(k) if (1..=MAX_TOP_K as u32).contains(&k) => Ok(k as usize),
        Some(k) => Err(ApiError::invalid("top_k", format!("must be within 1..{MAX_TOP_K} (is {k})"))),
    }
}

/// The passages of `hits` from `kb`.
pub fn passages(kb: &str, hits: Vec<Hit>) -> Vec<Passage> {
    hits.into_iter()
        .map(|h| Passage {
            knowledge_base: kb.to_string(),
            document: h.document,
            location: h.location,
            text: h.text,
            score: h.score,
        })
        .collect()
}
