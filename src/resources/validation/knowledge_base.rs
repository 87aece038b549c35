//! The rules of a KnowledgeBase (docs/concepts/knowledge.md), the same as its CEL rules plus the
//! schema's bounds, with field paths.

use kube::ResourceExt;

use super::{DNS1123_LABEL_HINT, Report, check_len, check_namespace, check_opt_len, is_dns1123_label, validate_share};
use crate::resources::KnowledgeBase;

/// The single-object rules of a KnowledgeBase:
/// - `metadata.name` (the slug) is a DNS-1123 label;
/// - `spec.source` sets exactly one of `documents` and `mcp`;
/// - `documents.folder` is a relative path without `..` segments;
/// - `mcp.url` is an http(s) URL, `mcp.tool` and the argument names are 1 to 128 characters;
/// - share scopes as for Agents; the schema's length bounds.
pub fn validate_knowledge_base(kb: &KnowledgeBase) -> Report {
    let mut report = Report::default();
    check_namespace(&mut report, &kb.metadata);
    let name = kb.name_any();
    if !is_dns1123_label(&name) {
        report.error(
            "metadata.name",
            format!("{name:?} is not a valid slug: a KnowledgeBase's name {DNS1123_LABEL_HINT}"),
        );
    }
    let spec = &kb.spec;
    check_opt_len(&mut report, "spec.displayName", spec.display_name.as_deref(), 200);
    check_opt_len(&mut report, "spec.description", spec.description.as_deref(), 4096);
    check_opt_len(&mut report, "spec.owner", spec.owner.as_deref(), 128);
    match (&spec.source.documents, &spec.source.mcp) {
        (Some(_), Some(_)) | (None, None) => report.error("spec.source", "set exactly one of documents and mcp"),
        _ => {}
    }
    if let Some(folder) = spec.source.documents.as_ref().and_then(|d| d.folder.as_deref()) {
        check_len(&mut report, "spec.source.documents.folder", folder, 1, 512);
        if folder.starts_with('/') || folder.split('/').any(|s| s == "..") {
            report.error("spec.source.documents.folder", "must be a relative path without '..' segments");
        }
    }
    if let Some(mcp) = &spec.source.mcp {
        check_len(&mut report, "spec.source.mcp.url", &mcp.url, 1, 2048);
        if !(mcp.url.starts_with("http://") || mcp.url.starts_with("https://")) {
            report.error("spec.source.mcp.url", "must be an http:// or https:// URL");
        }
        check_len(&mut report, "spec.source.mcp.tool", &mcp.tool, 1, 128);
        for (field, value) in [("queryArgument", &mcp.query_argument), ("topKArgument", &mcp.top_k_argument)] {
            if let Some(value) = value {
                check_len(&mut report, &format!("spec.source.mcp.{field}"), value, 1, 128);
            }
        }
        if let Some(secret) = &mcp.auth_secret_ref {
            check_len(&mut report, "spec.source.mcp.authSecretRef.name", &secret.name, 1, 253);
            check_len(&mut report, "spec.source.mcp.authSecretRef.key", &secret.key, 1, 253);
        }
    }
    if let Some(share) = &spec.share {
        validate_share(&mut report, share);
    }
    report
}
