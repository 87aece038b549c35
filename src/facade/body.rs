//! JSON request bodies whose every failure is a 4xx naming the problem: 400 for text that is not JSON,
//! 422 with the field for JSON of the wrong shape (unknown field, wrong type, missing field).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;

use super::error::ApiError;

/// A JSON body of type `T`.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state).await.map_err(|e| match e.status() {
            axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::TooLarge(format!("the body is larger than {} bytes", super::MAX_BODY_BYTES))
            }
            _ => ApiError::BadRequest(format!("cannot read the body: {}", e.body_text())),
        })?;
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|err| {
            let path = err.path().to_string();
            let inner = err.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                return ApiError::BadRequest(format!("the body is not JSON: {inner}"));
            }
            let message = inner.to_string();
            // A missing field is named itself, not its parent object.
            let missing = message.strip_prefix("missing field `").and_then(|rest| rest.split('`').next());
            let field = match (missing, path.as_str()) {
                (Some(name), ".") => name.to_string(),
                (Some(name), parent) => format!("{parent}.{name}"),
                (None, ".") => "body".to_string(),
                (None, _) => path,
            };
            ApiError::invalid(field, message)
        })?;
        deserializer.end().map_err(|e| ApiError::BadRequest(format!("the body is not one JSON value: {e}")))?;
        Ok(JsonBody(value))
    }
}

/// Query parameters of type `T`; a malformed query is a 400 naming the problem.
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut axum::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        serde_urlencoded::from_str(query)
            .map(QueryParams)
            .map_err(|e| ApiError::BadRequest(format!("the query is not valid: {e}")))
    }
}
