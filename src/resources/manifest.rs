//! Reading Agent and AgentRun manifests: the same YAML that `kubectl apply` takes, one or more documents
//! per file. Used by the local mode and the example checks; every failure names the document and the
//! field.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{API_VERSION, Agent, AgentRun};

/// One object read from a manifest.
#[derive(Clone, Debug)]
pub enum Manifest {
    /// An `Agent`.
    Agent(Box<Agent>),
    /// An `AgentRun`.
    AgentRun(Box<AgentRun>),
}

/// Why a manifest could not be read. `document` counts from 1 within the file.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The text is not YAML.
    #[error("document {document}: not valid YAML: {source}")]
    Yaml {
        /// Which document of the file.
        document: usize,
        /// The parser's error, with line and column.
        source: serde_norway::Error,
    },
    /// The document is not one of this operator's resources.
    #[error(
        "document {document}: apiVersion {api_version:?} kind {kind:?} is not an Agent or AgentRun of {API_VERSION}"
    )]
    UnknownKind {
        /// Which document of the file.
        document: usize,
        /// The document's `apiVersion`.
        api_version: String,
        /// The document's `kind`.
        kind: String,
    },
    /// A field has the wrong type or a required field is missing.
    #[error("document {document}: {field}: {message}")]
    Field {
        /// Which document of the file.
        document: usize,
        /// The field path, such as `spec.timeoutSeconds` (`.` for the whole document).
        field: String,
        /// What the decoder expected.
        message: String,
    },
}

/// Reads every non-empty YAML document of `text` as an Agent or AgentRun.
///
/// Errors: [`ManifestError::Yaml`] for text that does not parse, [`ManifestError::UnknownKind`] for
/// another `apiVersion`/`kind`, [`ManifestError::Field`] for a field of the wrong shape, naming it.
pub fn parse_manifests(text: &str) -> Result<Vec<Manifest>, ManifestError> {
    let mut manifests = Vec::new();
    for (index, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let document_number = index + 1;
        let value =
            Value::deserialize(document).map_err(|source| ManifestError::Yaml { document: document_number, source })?;
        if value.is_null() {
            continue;
        }
        manifests.push(manifest_from_value(value, document_number)?);
    }
    Ok(manifests)
}

/// Reads the manifests of one file; see [`parse_manifests`].
pub fn read_manifest_file(path: &Path) -> Result<Vec<Manifest>, ManifestError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| ManifestError::Io { path: path.display().to_string(), source })?;
    parse_manifests(&text)
}

/// Decodes one document, already parsed, as an Agent or AgentRun; `document` is its number in the file.
pub fn manifest_from_value(value: Value, document: usize) -> Result<Manifest, ManifestError> {
    let field_of = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default().to_string();
    let (api_version, kind) = (field_of("apiVersion"), field_of("kind"));
    match (api_version.as_str(), kind.as_str()) {
        (API_VERSION, "Agent") => decode(value, document).map(|a| Manifest::Agent(Box::new(a))),
        (API_VERSION, "AgentRun") => decode(value, document).map(|r| Manifest::AgentRun(Box::new(r))),
        _ => Err(ManifestError::UnknownKind { document, api_version, kind }),
    }
}

/// Decodes `value` as `T`, naming the failing field (`spec.context.tools[0]`) when it does not fit.
pub fn decode<T: serde::de::DeserializeOwned>(value: Value, document: usize) -> Result<T, ManifestError> {
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = err.path().to_string();
        let message = err.into_inner().to_string();
        // serde reports a missing field at its parent; name the field itself.
        let missing =
            message.strip_prefix("missing field `").and_then(|rest| rest.split_once('`')).map(|(name, _)| name);
        let field = match missing {
            Some(name) if path == "." => name.to_string(),
            Some(name) => format!("{path}.{name}"),
            None => path,
        };
        let message = if missing.is_some() { "is required".to_string() } else { message };
        ManifestError::Field { document, field, message }
    })
}
