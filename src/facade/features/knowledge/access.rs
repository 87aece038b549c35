//! Who may do what to a knowledge base, under the Agents' share rules ([`crate::access`]): a knowledge
//! base the caller may not read answers 404 exactly as a missing one ([`readable`]); one it may read but
//! not manage answers 403 to a change ([`manageable`]).

use kube::ResourceExt;

use crate::access::{Identity, Permission, knowledge_permission};
use crate::facade::http::error::ApiError;
use crate::resources::KnowledgeBase;

/// `kb` when `who` may read it; otherwise 404, as for a knowledge base that does not exist.
pub fn readable(kb: Option<KnowledgeBase>, who: &Identity, slug: &str) -> Result<KnowledgeBase, ApiError> {
    kb.filter(|kb| knowledge_permission(who, kb) >= Permission::Read)
        .ok_or_else(|| ApiError::NotFound(format!("knowledge base {slug:?} does not exist")))
}

pub fn manageable(kb: &KnowledgeBase, who: &Identity) -> Result<(), ApiError> {
    if knowledge_permission(who, kb) < Permission::Manage {
        return Err(ApiError::Forbidden(format!(
            "you may search knowledge base {:?} but not change it",
            kb.name_any()
        )));
    }
    Ok(())
}
