//! The catalog's refusals in the API's words: a resource field path in Yuxi's spelling ([`yuxi_field`]),
//! and the answer of every [`CatalogError`], so handlers use `?`:
//!
//! | from | answer |
//! |---|---|
//! | [`CatalogError::Exists`], [`CatalogError::Conflict`] | 409 `conflict`, the catalog's message |
//! | [`CatalogError::Missing`] | 404 `not_found`, "agent \"slug\" does not exist" (or "knowledge base ...") |
//! | [`CatalogError::Rejected`] | 422 `validation_failed`, the field the refusal names in Yuxi's spelling, else `agent` |
//! | [`CatalogError::Unavailable`] | 503 `unavailable`, the catalog's message |
//! | [`CatalogError::Forbidden`] | 403 `forbidden`: the API server refused the caller the facade wrote as (its message names the namespace) |

use super::CatalogError;
use crate::facade::http::error::ApiError;

/// A failure of the agent catalog (see the module's table).
impl From<CatalogError> for ApiError {
    fn from(err: CatalogError) -> Self {
        match err {
            CatalogError::Exists { .. } | CatalogError::Conflict(_) => ApiError::Conflict(err.to_string()),
            CatalogError::Missing { .. } => ApiError::NotFound(err.to_string()),
            CatalogError::Rejected(message) => {
                let field = rejected_field(&message).map(|f| yuxi_field(&f)).unwrap_or_else(|| "agent".to_string());
                ApiError::Invalid { field, message }
            }
            CatalogError::Unavailable(message) => ApiError::Unavailable(message),
            CatalogError::Forbidden(message) => ApiError::Forbidden(message),
        }
    }
}

/// The field a Kubernetes refusal names: `... is invalid: spec.context.tools[0]: Invalid value ...`, or an
/// admission denial `... denied the request: spec.backend: ...`.
fn rejected_field(message: &str) -> Option<String> {
    let rest = message
        .split_once("is invalid: ")
        .or_else(|| message.split_once("denied the request: "))
        .map(|(_, rest)| rest)?;
    let field = rest.split_once(": ")?.0;
    (field.starts_with("spec") || field.starts_with("metadata")).then(|| field.to_string())
}

/// A resource field path in Yuxi's spelling: `spec.context.maxExecutionSteps` is
/// `config_json.context.max_execution_steps`, `spec.backend` is `backend_id`, `metadata.name` is `slug`.
pub fn yuxi_field(path: &str) -> String {
    let renamed = [
        ("metadata.name", "slug"),
        ("spec.displayName", "name"),
        ("spec.backend", "backend_id"),
        ("spec.isSubagent", "is_subagent"),
        ("spec.default", "is_default"),
        ("spec.owner", "created_by"),
        ("spec.context", "config_json.context"),
        ("spec.share", "share_config"),
        ("spec.description", "description"),
    ];
    let path = renamed
        .iter()
        .find_map(|(from, to)| path.strip_prefix(from).map(|rest| format!("{to}{rest}")))
        .unwrap_or_else(|| path.to_string());
    let mut snake = String::with_capacity(path.len() + 8);
    for c in path.chars() {
        if c.is_ascii_uppercase() {
            snake.push('_');
            snake.push(c.to_ascii_lowercase());
        } else {
            snake.push(c);
        }
    }
    snake
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_fields_in_yuxi_spelling() {
        assert_eq!(yuxi_field("spec.context.maxExecutionSteps"), "config_json.context.max_execution_steps");
        assert_eq!(yuxi_field("spec.share.readScope.departmentIds"), "share_config.read_scope.department_ids");
        assert_eq!(yuxi_field("spec.isSubagent"), "is_subagent");
        assert_eq!(yuxi_field("spec.backend"), "backend_id");
        assert_eq!(yuxi_field("metadata.name"), "slug");
        assert_eq!(yuxi_field("spec.context.tools[2]"), "config_json.context.tools[2]");
    }

    #[test]
    fn kubernetes_refusals_name_the_yuxi_field() {
        let cel = r#"Agent.yuxi.dev "x" is invalid: spec.context.maxExecutionSteps: Invalid value: 0: must be >= 1"#;
        let ApiError::Invalid { field, .. } = ApiError::from(CatalogError::Rejected(cel.into())) else { panic!() };
        assert_eq!(field, "config_json.context.max_execution_steps");
        let webhook = r#"admission webhook "agents.yuxi.dev" denied the request: spec.isSubagent: must be true"#;
        let ApiError::Invalid { field, .. } = ApiError::from(CatalogError::Rejected(webhook.into())) else { panic!() };
        assert_eq!(field, "is_subagent");
        let ApiError::Invalid { field, .. } = ApiError::from(CatalogError::Rejected("no field here".into())) else {
            panic!()
        };
        assert_eq!(field, "agent");
    }

    #[test]
    fn catalog_failures_answer_as_before() {
        let answer = |err: ApiError| (err.status().0.as_u16(), err.to_string());
        assert_eq!(
            answer(CatalogError::Exists { noun: "agent", slug: "a".into() }.into()),
            (409, r#"agent "a" exists already"#.into())
        );
        assert_eq!(answer(CatalogError::Conflict("stale".into()).into()), (409, "stale".into()));
        assert_eq!(
            answer(CatalogError::Missing { noun: "agent", slug: "a".into() }.into()),
            (404, r#"agent "a" does not exist"#.into())
        );
        assert_eq!(answer(CatalogError::Unavailable("down".into()).into()), (503, "down".into()));
    }
}
