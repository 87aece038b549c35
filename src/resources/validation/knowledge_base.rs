//! The rules of a KnowledgeBase (docs/concepts/knowledge.md), the same as its CEL rules plus the
//! schema's bounds, with field paths.

use kube::ResourceExt;

use super::{
    DNS1123_LABEL_HINT, Report, check_len, check_namespace, check_opt_len, is_dns1123_label, is_dns1123_subdomain,
    validate_share,
};
use crate::resources::KnowledgeBase;

/// The single-object rules of a KnowledgeBase:
/// - `metadata.name` (the slug) is a DNS-1123 label;
/// - `spec.source` sets exactly one of `documents` and `mcp`;
/// - `documents.folder` is a relative path without `..` segments;
/// - `documents` sets at most one of `folder` and `configMap`, whose name is a DNS-1123 subdomain;
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
    if let Some(documents) = &spec.source.documents {
        if documents.folder.is_some() && documents.config_map.is_some() {
            report.error("spec.source.documents", "set at most one of folder and configMap");
        }
        if let Some(config_map) = &documents.config_map {
            check_len(&mut report, "spec.source.documents.configMap.name", &config_map.name, 1, 253);
            if !is_dns1123_subdomain(&config_map.name) {
                report.error(
                    "spec.source.documents.configMap.name",
                    format!("{:?} is not a ConfigMap name (a DNS-1123 subdomain)", config_map.name),
                );
            }
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

/// The most bytes a ConfigMap holds, keys and values together (the API server's limit, 1 MiB).
pub const MAX_CONFIG_MAP_BYTES: usize = 1024 * 1024;

/// The rules the API server applies to a ConfigMap that the local mode reads from its manifests folder
/// (the documents of a `documents.configMap` KnowledgeBase): its name is a DNS-1123 subdomain, each key
/// is 1 to 253 of `[-._a-zA-Z0-9]` and in `data` or `binaryData` but not both, and all of it is at most
/// [`MAX_CONFIG_MAP_BYTES`].
pub fn validate_config_map(config_map: &k8s_openapi::api::core::v1::ConfigMap) -> Report {
    let mut report = Report::default();
    check_namespace(&mut report, &config_map.metadata);
    let name = config_map.name_any();
    if !is_dns1123_subdomain(&name) {
        report.error("metadata.name", format!("{name:?} is not a ConfigMap name (a DNS-1123 subdomain)"));
    }
    let data = config_map.data.iter().flatten().map(|(k, v)| (k, v.len(), "data"));
    let binary = config_map.binary_data.iter().flatten().map(|(k, v)| (k, v.0.len(), "binaryData"));
    let mut total = 0;
    for (key, len, field) in data.chain(binary) {
        total += key.len() + len;
        let valid = !key.is_empty()
            && key.len() <= 253
            && key != "."
            && key != ".."
            && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !valid {
            report
                .error(format!("{field}.{key}"), "a key is 1 to 253 of the characters a-z, A-Z, 0-9, '-', '_' and '.'");
        }
        if field == "binaryData" && config_map.data.as_ref().is_some_and(|d| d.contains_key(key)) {
            report.error(format!("binaryData.{key}"), "the key is in data too");
        }
    }
    if total > MAX_CONFIG_MAP_BYTES {
        report.error("data", format!("{total} bytes; a ConfigMap holds at most {MAX_CONFIG_MAP_BYTES}"));
    }
    report
}
