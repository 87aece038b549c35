//! Embedding vectors from an OpenAI-compatible endpoint (`POST <base>/embeddings`, the body
//! `{"model", "input": [texts]}`, the answer `{"data": [{"index", "embedding": [floats]}]}`), for hybrid
//! search ([`super::hybrid`]). Texts go in batches of [`BATCH`]; each call has [`CALL_TIMEOUT`].

use std::time::Duration;

use serde::Deserialize;
use serde_json::json;

/// Texts per call.
pub const BATCH: usize = 64;

/// How long one call may take.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// The embeddings endpoint failed; the message names it and what it did.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddingsError {
    /// The HTTP client cannot be built.
    #[error("cannot build the HTTP client for the embeddings endpoint: {0}")]
    Client(reqwest::Error),
    /// The endpoint could not be reached or did not answer in time.
    #[error("the embeddings endpoint {url} cannot be reached: {source}")]
    Unreachable {
        /// The endpoint.
        url: String,
        /// Why.
        source: reqwest::Error,
    },
    /// It answered an error status.
    #[error("the embeddings endpoint {url} answered {status}: {message}")]
    Refused {
        /// The endpoint.
        url: String,
        /// The status.
        status: reqwest::StatusCode,
        /// The start of its answer.
        message: String,
    },
    /// Its answer is not a list of one vector per text, all of one length.
    #[error("the embeddings endpoint {url} answered no usable vectors: {reason}")]
    Malformed {
        /// The endpoint.
        url: String,
        /// What is wrong.
        reason: String,
    },
}

/// An OpenAI-compatible embeddings endpoint.
#[derive(Clone)]
pub struct Embeddings {
    http: reqwest::Client,
    url: String,
    model: String,
    key: Option<String>,
}

impl std::fmt::Debug for Embeddings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embeddings").field("url", &self.url).field("model", &self.model).finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Answer {
    data: Vec<Item>,
}

#[derive(Deserialize)]
struct Item {
    index: usize,
    embedding: Vec<f32>,
}

impl Embeddings {
    /// The endpoint under `base` (such as `https://api.openai.com/v1`), asked for `model`'s vectors with
    /// `key` as the bearer token when set. Errors: [`EmbeddingsError::Client`].
    pub fn new(base: &str, model: &str, key: Option<String>) -> Result<Self, EmbeddingsError> {
        crate::tls::install_crypto_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(EmbeddingsError::Client)?;
        Ok(Self { http, url: format!("{}/embeddings", base.trim_end_matches('/')), model: model.to_string(), key })
    }

    /// One vector per text of `texts`, in order, all of one length.
    ///
    /// Errors: [`EmbeddingsError`]: the endpoint cannot be reached, refuses, or answers something else.
    pub async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            vectors.extend(self.call(batch).await?);
        }
        if let Some(first) = vectors.first()
            && vectors.iter().any(|v| v.len() != first.len() || v.is_empty())
        {
            return Err(self.malformed("the vectors are not all of one length"));
        }
        Ok(vectors)
    }

    async fn call(&self, batch: &[String]) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        let mut request = self.http.post(&self.url).json(&json!({"model": self.model, "input": batch}));
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        let unreachable = |source| EmbeddingsError::Unreachable { url: self.url.clone(), source };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        if !status.is_success() {
            let text = response.text().await.unwrap_or_default();
            return Err(EmbeddingsError::Refused {
                url: self.url.clone(),
                status,
                message: text.chars().take(300).collect(),
            });
        }
        let mut answer: Answer = response.json().await.map_err(|e| self.malformed(&e.to_string()))?;
        if answer.data.len() != batch.len() {
            return Err(self.malformed(&format!("{} vectors for {} texts", answer.data.len(), batch.len())));
        }
        answer.data.sort_by_key(|item| item.index);
        Ok(answer.data.into_iter().map(|item| item.embedding).collect())
    }

    fn malformed(&self, reason: &str) -> EmbeddingsError {
        EmbeddingsError::Malformed { url: self.url.clone(), reason: reason.to_string() }
    }
}
