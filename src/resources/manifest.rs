//! Reading Agent and AgentRun manifests: the same YAML that `kubectl apply` takes, one or more documents
//! per file. Used by the local mode and the example checks; every failure names the document and the
//! field.

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{API_VERSION, Agent, AgentRun, KnowledgeBase, Model};

/// One object read from a manifest.
/// Serialized, it is the object itself.
#[derive(Clone, Debug, serde::Serialize)]
#[serde(untagged)]
pub enum Manifest {
    /// An `Agent`.
    Agent(Box<Agent>),
    /// An `AgentRun`.
    AgentRun(Box<AgentRun>),
    /// A `KnowledgeBase`.
    KnowledgeBase(Box<KnowledgeBase>),
    /// A `Model`: a chat-model endpoint agents name in `context.model`.
    Model(Box<Model>),
    /// An `McpServer`: an MCP server agents name in `context.mcps`.
    McpServer(Box<super::mcp_server::McpServer>),
    /// A core `v1` `ConfigMap`: the documents of a KnowledgeBase whose `documents.configMap` names it.
    ConfigMap(Box<k8s_openapi::api::core::v1::ConfigMap>),
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
        "document {document}: apiVersion {api_version:?} kind {kind:?} is not an Agent, AgentRun, KnowledgeBase or Model of {API_VERSION}, nor a v1 ConfigMap"
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

impl ManifestError {
    /// The same finding again, for a second look at one reading: an I/O error keeps its kind and
    /// message, a YAML error becomes a [`ManifestError::Field`] on the whole document with its message.
    pub fn duplicate(&self) -> ManifestError {
        match self {
            ManifestError::Io { path, source } => {
                ManifestError::Io { path: path.clone(), source: std::io::Error::new(source.kind(), source.to_string()) }
            }
            ManifestError::Yaml { document, source } => ManifestError::Field {
                document: *document,
                field: ".".into(),
                message: format!("document {document}: not valid YAML: {source}"),
            },
            ManifestError::UnknownKind { document, api_version, kind } => {
                ManifestError::UnknownKind { document: *document, api_version: api_version.clone(), kind: kind.clone() }
            }
            ManifestError::Field { document, field, message } => {
                ManifestError::Field { document: *document, field: field.clone(), message: message.clone() }
            }
        }
    }
}

/// Reads every non-empty YAML document of `text` as an Agent or AgentRun; the first failure stops it.
///
/// Errors: as [`parse_documents`].
pub fn parse_manifests(text: &str) -> Result<Vec<Manifest>, ManifestError> {
    parse_documents(text).into_iter().collect()
}

/// Reads each non-empty YAML document of `text` on its own, so one bad document does not hide the others.
///
/// Errors, per document: [`ManifestError::Yaml`] for text that does not parse, [`ManifestError::UnknownKind`]
/// for another `apiVersion`/`kind`, [`ManifestError::Field`] for a field the schema does not declare, a number
/// that is not finite (`.inf`, `.nan`), a non-string key, or a value of the wrong shape, naming the field.
pub fn parse_documents(text: &str) -> Vec<Result<Manifest, ManifestError>> {
    yaml_documents(text, manifest_from_value)
}

/// Reads the manifests of a file this system wrote by serializing typed objects (the AgentRun and Agent
/// a runner is handed by the facade or the controller), decoded as [`parse_manifests`] decodes them but
/// without its check for fields the schema does not declare: a serialized object has none, and the
/// check needs both CRDs' schemas built in the reading process (milliseconds that would be paid on
/// every run's start).
///
/// Errors: as [`parse_manifests`], except [`ManifestError::Field`] for an undeclared field.
pub fn read_written_manifests(path: &Path) -> Result<Vec<Manifest>, ManifestError> {
    yaml_documents(&read_manifest_text(path)?, decode_manifest).into_iter().collect()
}

/// Each non-empty YAML document of `text`, converted to JSON and given to `decode` with its number.
fn yaml_documents(
    text: &str,
    decode: fn(Value, usize) -> Result<Manifest, ManifestError>,
) -> Vec<Result<Manifest, ManifestError>> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut documents = Vec::new();
    for (index, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let number = index + 1;
        let parsed = serde_norway::Value::deserialize(document)
            .map_err(|source| ManifestError::Yaml { document: number, source });
        match parsed {
            Ok(serde_norway::Value::Null) => {}
            Ok(yaml) => documents.push(to_json(&yaml, number).and_then(|value| decode(value, number))),
            Err(err) => {
                documents.push(Err(err));
                // The parser cannot resume after a syntax error.
                break;
            }
        }
    }
    documents
}

/// Converts a YAML document to JSON, refusing what JSON cannot hold (non-finite numbers, non-string keys)
/// rather than silently turning it into null.
fn to_json(yaml: &serde_norway::Value, document: usize) -> Result<Value, ManifestError> {
    fn check(yaml: &serde_norway::Value, path: &str, document: usize) -> Result<(), ManifestError> {
        let field = |p: &str| if p.is_empty() { ".".to_string() } else { p.to_string() };
        match yaml {
            serde_norway::Value::Number(n) if n.as_f64().is_some_and(|f| !f.is_finite()) => Err(ManifestError::Field {
                document,
                field: field(path),
                message: format!("{n} is not a finite number"),
            }),
            serde_norway::Value::Sequence(items) => {
                items.iter().enumerate().try_for_each(|(i, item)| check(item, &format!("{path}[{i}]"), document))
            }
            serde_norway::Value::Mapping(map) => map.iter().try_for_each(|(key, value)| {
                let Some(key) = key.as_str() else {
                    return Err(ManifestError::Field {
                        document,
                        field: field(path),
                        message: format!("the key {key:?} is not a string"),
                    });
                };
                check(value, &if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }, document)
            }),
            serde_norway::Value::Tagged(tagged) => check(&tagged.value, path, document),
            _ => Ok(()),
        }
    }
    check(yaml, "", document)?;
    serde_json::to_value(yaml).map_err(|e| ManifestError::Field {
        document,
        field: ".".to_string(),
        message: e.to_string(),
    })
}

/// The largest manifest file read, in bytes (etcd stores objects of at most 1.5 MiB).
pub const MAX_MANIFEST_BYTES: u64 = 4 * 1024 * 1024;

/// Reads the manifests of one file; see [`parse_manifests`].
pub fn read_manifest_file(path: &Path) -> Result<Vec<Manifest>, ManifestError> {
    parse_manifests(&read_manifest_text(path)?)
}

/// Reads a manifest file: a regular file of at most [`MAX_MANIFEST_BYTES`], as UTF-8 text.
pub fn read_manifest_text(path: &Path) -> Result<String, ManifestError> {
    use std::io::Read;
    let io = |source| ManifestError::Io { path: path.display().to_string(), source };
    let metadata = std::fs::metadata(path).map_err(io)?;
    if !metadata.is_file() || metadata.len() > MAX_MANIFEST_BYTES {
        let message = format!("not a regular file of at most {MAX_MANIFEST_BYTES} bytes");
        return Err(io(std::io::Error::new(std::io::ErrorKind::InvalidInput, message)));
    }
    // Opened without waiting (a FIFO or a device swapped in after the look above never blocks the
    // reader), and read only when what was opened is a regular file.
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path).map_err(io)?
    };
    if !file.metadata().map_err(io)?.is_file() {
        let message = format!("not a regular file of at most {MAX_MANIFEST_BYTES} bytes");
        return Err(io(std::io::Error::new(std::io::ErrorKind::InvalidInput, message)));
    }
    let mut text = String::new();
    file.take(MAX_MANIFEST_BYTES).read_to_string(&mut text).map_err(io)?;
    Ok(text)
}

/// Decodes one document, already parsed, as an Agent or AgentRun; `document` is its number in the file.
pub fn manifest_from_value(value: Value, document: usize) -> Result<Manifest, ManifestError> {
    let field_of = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default().to_string();
    let (api_version, kind) = (field_of("apiVersion"), field_of("kind"));
    if api_version == API_VERSION
        && let Some(schema) = super::crd::schema(&kind)
        && let Some(field) = super::crd::unknown_fields(&value, schema).into_iter().next()
    {
        return Err(ManifestError::Field { document, field, message: format!("unknown field of {kind}") });
    }
    decode_manifest(value, document)
}

/// Decodes one document as an Agent or AgentRun by its `apiVersion` and `kind`, without the schema's
/// check for undeclared fields.
fn decode_manifest(value: Value, document: usize) -> Result<Manifest, ManifestError> {
    let field_of = |name: &str| value.get(name).and_then(Value::as_str).unwrap_or_default().to_string();
    let (api_version, kind) = (field_of("apiVersion"), field_of("kind"));
    match (api_version.as_str(), kind.as_str()) {
        (API_VERSION, "Agent") => decode(value, document).map(|a| Manifest::Agent(Box::new(a))),
        (API_VERSION, "AgentRun") => decode(value, document).map(|r| Manifest::AgentRun(Box::new(r))),
        (API_VERSION, "KnowledgeBase") => decode(value, document).map(|k| Manifest::KnowledgeBase(Box::new(k))),
        (API_VERSION, "Model") => decode(value, document).map(|m| Manifest::Model(Box::new(m))),
        (API_VERSION, "McpServer") => decode(value, document).map(|m| Manifest::McpServer(Box::new(m))),
        ("v1", "ConfigMap") => decode(value, document).map(|c| Manifest::ConfigMap(Box::new(c))),
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
