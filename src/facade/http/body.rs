//! JSON request bodies whose every failure is a 4xx naming the problem: 400 for text that is not JSON,
//! 422 with the field for JSON of the wrong shape (unknown field, wrong type, missing field). A number with
//! no fractional part is an integer (`5.0` fills an integer field), as JSON Schema and FastAPI read it; an
//! object is never read from an array of its fields' values (which serde alone would accept).
//!
//! Also here: query parameters ([`QueryParams`]), the size bound of a JSON field ([`json_within`]) and the
//! OpenAPI shape of a one-file multipart upload ([`UploadForm`]).

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::error::ApiError;

/// A JSON body of type `T`.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state).await.map_err(|e| match e.status() {
            axum::http::StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::TooLarge(format!("the body is larger than {} bytes", super::limits::MAX_BODY_BYTES))
            }
            _ => ApiError::BadRequest(format!("cannot read the body: {}", e.body_text())),
        })?;
        let json: Value = serde_json::from_slice(&bytes).map_err(|err| {
            if err.is_syntax() || err.is_eof() {
                ApiError::BadRequest(format!("the body is not JSON: {err}"))
            } else {
                ApiError::invalid("body", err.to_string())
            }
        })?;
        let value = decode(json)?;
        Ok(JsonBody(value))
    }
}

/// `json` read as a `T` as a request body is: integral numbers as integers, objects from objects only.
///
/// Errors: 422 naming the field that does not fit (a missing one by its own name).
pub fn decode<T: DeserializeOwned>(mut json: Value) -> Result<T, ApiError> {
    integral_numbers_as_integers(&mut json);
    serde_path_to_error::deserialize(Strict(json)).map_err(|err| {
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
    })
}

/// A JSON value read as a body is: like serde_json's own, except that an object type (a struct) is read
/// from a JSON object only, never from an array of its fields' values, which serde accepts otherwise.
struct Strict(Value);

impl<'de> serde::Deserializer<'de> for Strict {
    type Error = serde_json::Error;

    fn deserialize_any<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Array(items) => visitor.visit_seq(StrictSeq(items.into_iter())),
            Value::Object(fields) => visitor.visit_map(StrictMap { fields: fields.into_iter(), value: None }),
            other => serde::Deserializer::deserialize_any(other, visitor),
        }
    }

    fn deserialize_option<V: serde::de::Visitor<'de>>(self, visitor: V) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            other => visitor.visit_some(Strict(other)),
        }
    }

    fn deserialize_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        match self.0 {
            Value::Object(fields) => visitor.visit_map(StrictMap { fields: fields.into_iter(), value: None }),
            other => Err(serde::de::Error::invalid_type(unexpected(&other), &visitor)),
        }
    }

    fn deserialize_newtype_struct<V: serde::de::Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: serde::de::Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Self::Error> {
        serde::Deserializer::deserialize_enum(self.0, name, variants, visitor)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf unit unit_struct
        seq tuple tuple_struct map identifier ignored_any
    }
}

/// What serde names `value` in a type error.
fn unexpected(value: &Value) -> serde::de::Unexpected<'_> {
    use serde::de::Unexpected;
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => n.as_f64().map_or(Unexpected::Other("number"), Unexpected::Float),
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

/// The items of an array, each read as [`Strict`].
struct StrictSeq(std::vec::IntoIter<Value>);

impl<'de> serde::de::SeqAccess<'de> for StrictSeq {
    type Error = serde_json::Error;

    fn next_element_seed<T: serde::de::DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Self::Error> {
        self.0.next().map(|item| seed.deserialize(Strict(item))).transpose()
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// The fields of an object, each value read as [`Strict`].
struct StrictMap {
    fields: serde_json::map::IntoIter,
    value: Option<Value>,
}

impl<'de> serde::de::MapAccess<'de> for StrictMap {
    type Error = serde_json::Error;

    fn next_key_seed<K: serde::de::DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Self::Error> {
        let Some((key, value)) = self.fields.next() else { return Ok(None) };
        self.value = Some(value);
        seed.deserialize(serde::de::value::StringDeserializer::new(key)).map(Some)
    }

    fn next_value_seed<V: serde::de::DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Self::Error> {
        let value = self.value.take().ok_or_else(|| serde::de::Error::custom("a value without its key"))?;
        seed.deserialize(Strict(value))
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

/// 413 naming `field` when `map` takes more than `max` bytes as JSON.
pub fn json_within(field: &str, map: &Map<String, Value>, max: usize) -> Result<(), ApiError> {
    let size = serde_json::to_vec(map).map_or(usize::MAX, |bytes| bytes.len());
    if size > max {
        return Err(ApiError::TooLarge(format!("{field}: {size} bytes of JSON; at most {max}")));
    }
    Ok(())
}

/// The multipart body of `POST /api/chat/attachments/tmp`: one field `file` (other parts are not
/// expected; a part the multipart parser cannot read answers 400).
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
pub struct UploadForm {
    /// The file.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
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
        #[serde(default)]
        inner: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    struct Inner {
        #[serde(default)]
        name: Option<String>,
    }

    fn read(text: &str) -> Result<Body, ApiError> {
        let request = Request::builder().body(axum::body::Body::from(text.to_string())).expect("request");
        futures::executor::block_on(JsonBody::<Body>::from_request(request, &())).map(|JsonBody(body)| body)
    }

    #[test]
    fn integral_numbers_fill_integer_fields_and_fractions_or_arrays_for_objects_are_refused_naming_the_field() {
        let body = read(r#"{"limit": 5.0, "delta": -2e0, "ratio": 3.0}"#).expect("integral numbers are integers");
        assert_eq!((body.limit, body.delta, body.ratio), (5, Some(-2), Some(3.0)));
        assert_eq!(read(r#"{"limit": 1, "ratio": 0.5}"#).expect("a float field").ratio, Some(0.5));
        let inner = read(r#"{"limit": 1, "inner": {"name": "x"}}"#).expect("an object").inner;
        assert_eq!(inner.and_then(|i| i.name).as_deref(), Some("x"));
        for (text, field) in [
            (r#"{"limit": 5.5}"#, "limit"),
            (r#"{"limit": -1.0}"#, "limit"),
            (r#"{"limit": 1e30}"#, "limit"),
            (r#"{"limit": 1, "x": 1}"#, "x"),
            (r#"[1]"#, "body"),
            (r#"{"limit": 1, "inner": [null]}"#, "inner"),
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
