//! JSON request bodies whose every failure is a 4xx naming the problem: 400 for text that is not JSON,
//! 422 with the field for JSON of the wrong shape (unknown field, wrong type, missing field). A number with
//! no fractional part is an integer (`5.0` fills an integer field), as JSON Schema and FastAPI read it.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;
use serde_json::Value;

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
        let mut json: Value = serde_json::from_slice(&bytes).map_err(|err| {
            if err.is_syntax() || err.is_eof() {
                ApiError::BadRequest(format!("the body is not JSON: {err}"))
            } else {
                ApiError::invalid("body", err.to_string())
            }
        })?;
        integral_numbers_as_integers(&mut json);
        let value = serde_path_to_error::deserialize(json).map_err(|err| {
            let path = err.path().to_string();
            let message = err.into_inner().to_string();
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
        Ok(JsonBody(value))
    }
}

/// Writes every number of `value` that has no fractional part (`5.0`, `1e3`) as an integer, so that an
/// integer field accepts it as JSON Schema (`"type": "integer"`) and FastAPI do. A number too large for
/// 64 bits stays as it is (and an integer field refuses it, naming the field).
fn integral_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(number) if !number.is_i64() && !number.is_u64() => {
            let Some(float) = number.as_f64().filter(|f| f.fract() == 0.0) else { return };
            let integer = if float >= 0.0 && float < u64::MAX as f64 {
                serde_json::Number::from(float as u64)
            } else if float < 0.0 && float >= i64::MIN as f64 {
                serde_json::Number::from(float as i64)
            } else {
                return;
            };
            *number = integer;
        }
        Value::Array(items) => items.iter_mut().for_each(integral_numbers_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(integral_numbers_as_integers),
        _ => {}
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Body {
        limit: u64,
        #[serde(default)]
        delta: Option<i64>,
        #[serde(default)]
        ratio: Option<f64>,
    }

    fn read(text: &str) -> Result<Body, ApiError> {
        let request = Request::builder().body(axum::body::Body::from(text.to_string())).expect("request");
        futures::executor::block_on(JsonBody::<Body>::from_request(request, &())).map(|JsonBody(body)| body)
    }

    #[test]
    fn integral_numbers_fill_integer_fields_and_fractions_are_refused_naming_the_field() {
        let body = read(r#"{"limit": 5.0, "delta": -2e0, "ratio": 3.0}"#).expect("integral numbers are integers");
        assert_eq!((body.limit, body.delta, body.ratio), (5, Some(-2), Some(3.0)));
        assert_eq!(read(r#"{"limit": 1, "ratio": 0.5}"#).expect("a float field").ratio, Some(0.5));
        for (text, field) in [
            (r#"{"limit": 5.5}"#, "limit"),
            (r#"{"limit": -1.0}"#, "limit"),
            (r#"{"limit": 1e30}"#, "limit"),
            (r#"{"limit": 1, "x": 1}"#, "x"),
            (r#"{}"#, "limit"),
        ] {
            let Err(ApiError::Invalid { field: named, .. }) = read(text) else { panic!("{text} accepted") };
            assert_eq!(named, field, "{text}");
        }
    }

    #[test]
    fn text_that_is_not_one_json_value_is_a_400() {
        for text in ["", "{", r#"{"limit": 1} {"limit": 2}"#, "not json"] {
            assert!(matches!(read(text), Err(ApiError::BadRequest(_))), "{text:?}");
        }
    }
}
