//! Whose run is whose: a run of another user answers as a missing one ([`mine`]).

use crate::access::{Identity, Role};
use crate::facade::http::error::ApiError;
use crate::run::RunRecord;
use crate::run::thread_id::is_valid_id;
use crate::store::Store;

/// The run, when it belongs to `who` (a superadmin sees every run).
pub async fn mine(store: &Store, who: &Identity, run_id: &str) -> Result<RunRecord, ApiError> {
    let missing = || ApiError::NotFound(format!("run {run_id:?} does not exist"));
    if !is_valid_id(run_id) {
        return Err(missing());
    }
    let record = store.run_record(run_id).await?.ok_or_else(missing)?;
    if record.uid == who.uid || who.role == Role::Superadmin { Ok(record) } else { Err(missing()) }
}
