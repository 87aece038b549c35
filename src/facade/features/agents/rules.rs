//! The validation module's verdict on an agent about to be written, among the others of its namespace,
//! as a 422 in Yuxi's field names ([`judge`]): every create, change and default move goes through it.

use crate::facade::http::error::ApiError;
use crate::facade::services::catalog::fields::yuxi_field;
use crate::resources::Agent;
use crate::resources::validation::{validate_agent, validate_agent_among};

/// The validation module's verdict, the first error as a 422 in Yuxi's field names.
pub fn judge(agent: &Agent, others: &[Agent]) -> Result<(), ApiError> {
    let mut report = validate_agent(agent);
    report.extend(validate_agent_among(agent, others));
    match report.errors.first() {
        None => Ok(()),
        Some(error) => Err(ApiError::invalid(yuxi_field(&error.field), error.message.as_str())),
    }
}
