//! Fields several requests carry and check alike: a request id (`meta.request_id`, [`request_id_of`])
//! and a model (`<provider>/<model>`, [`is_model_spec`]).

use serde_json::{Map, Value};

use crate::facade::http::error::ApiError;
use crate::run::thread_id::is_valid_id;

/// The longest `meta.request_id`, in characters (Yuxi: 64).
pub const MAX_REQUEST_ID_LEN: usize = 64;
/// The longest `model_spec`, in characters.
pub const MAX_MODEL_SPEC_LEN: usize = 256;

/// The request id a `meta` names (`meta.request_id`), or a new one when it names none. Errors: 422
/// naming `meta.request_id` when it is not an id of at most [`MAX_REQUEST_ID_LEN`] characters.
pub fn request_id_of(meta: &Map<String, Value>) -> Result<String, ApiError> {
    match meta.get("request_id") {
        None | Some(Value::Null) => Ok(uuid::Uuid::new_v4().to_string()),
        Some(Value::String(id)) if is_valid_id(id) && id.len() <= MAX_REQUEST_ID_LEN => Ok(id.clone()),
        Some(other) => Err(ApiError::invalid(
            "meta.request_id",
            format!(
                "{other} is not a request id (letters, digits, '.', '_', '-'; at most {MAX_REQUEST_ID_LEN} characters)"
            ),
        )),
    }
}

/// Whether `model` reads `<provider>/<model>`: two non-empty parts of printable ASCII without spaces.
pub fn is_model_spec(model: &str) -> bool {
    model.len() <= MAX_MODEL_SPEC_LEN
        && model.split_once('/').is_some_and(|(provider, name)| !provider.is_empty() && !name.is_empty())
        && model.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::is_model_spec;

    #[test]
    fn a_model_spec_is_a_provider_and_a_model() {
        assert!(is_model_spec("openai/gpt-4o-mini"));
        assert!(is_model_spec("scripted/file:a/b.yaml"));
        assert!(!is_model_spec("gpt-4o"));
        assert!(!is_model_spec("/x"));
        assert!(!is_model_spec("a/ b"));
        assert!(!is_model_spec(&format!("a/{}", "b".repeat(300))));
    }
}
