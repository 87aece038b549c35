//! Checking a set of manifest files together, as `yuxi-operator validate` and the local mode do: every
//! object by its own rules (Agents, AgentRuns, KnowledgeBases, Models), and every Agent against the other
//! Agents of its namespace among the files (the rules the webhook checks against the cluster).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kube::ResourceExt;

use super::manifest::{Manifest, ManifestError, parse_documents, read_manifest_text};
use super::validation::{
    FieldIssue, Report, validate_agent, validate_agent_among, validate_agent_run, validate_agent_run_update,
    validate_config_map, validate_knowledge_base, validate_model,
};
use super::{Agent, AgentRun, KnowledgeBase};
use k8s_openapi::api::core::v1::ConfigMap;

/// The namespace of an object whose manifest names none, as `kubectl apply` would use it by default.
pub const DEFAULT_NAMESPACE: &str = "default";

/// What was found about one document of one file.
#[derive(Clone, Debug)]
pub struct Checked {
    /// `path` or `path#N` for the N-th document of a multi-document file.
    pub origin: String,
    /// `Kind namespace/name`, or `None` when the document could not be read as an object.
    pub object: Option<String>,
    /// The findings.
    pub report: Report,
    /// Whether the document is of another kind, and was not checked.
    pub skipped: bool,
}

/// Every manifest file under `paths`: a file is taken as it is, a folder for its `.yaml` and `.yml`
/// files (not its sub-folders), sorted by name.
pub fn manifest_files(paths: &[PathBuf]) -> std::io::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(path)?
                .filter_map(|entry| entry.ok().map(|e| e.path()))
                .filter(|p| p.is_file() && matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
                .collect();
            found.sort();
            files.extend(found);
        } else {
            files.push(path.clone());
        }
    }
    Ok(files)
}

/// Reads and checks every document of `files`, in order. Agents are also checked against the other
/// Agents of their namespace among the files; an AgentRun named again is checked as an update of the
/// earlier one. Documents of other kinds are reported as skipped (a GitOps folder holds more than these
/// two kinds); a document that cannot be read gives one finding naming the document and field, and the
/// file's other documents are still checked.
pub fn check_files(files: &[PathBuf]) -> Vec<Checked> {
    let mut checked = Vec::new();
    let mut agents: Vec<(String, Agent)> = Vec::new();
    let mut runs: HashMap<String, AgentRun> = HashMap::new();
    // The knowledge bases, ConfigMaps and Models seen, each as `describe` names it (kind included).
    let mut declared: std::collections::HashSet<String> = std::collections::HashSet::new();
    // Checked once for its kind, and named twice among the files is an error.
    let mut once = |origin: String, object: String, mut report: Report| {
        if !declared.insert(object.clone()) {
            report.error("metadata.name", format!("{object} is declared twice among the files"));
        }
        Checked { origin, object: Some(object), report, skipped: false }
    };
    for file in files {
        let documents = match read_manifest_text(file) {
            Ok(text) => parse_documents(&text),
            Err(err) => vec![Err(err)],
        };
        let many = documents.len() > 1;
        for (i, document) in documents.into_iter().enumerate() {
            let origin = origin(file, many.then_some(i + 1));
            match document {
                Ok(Manifest::Agent(agent)) => agents.push((origin, *agent)),
                Ok(Manifest::KnowledgeBase(kb)) => {
                    let object = describe("KnowledgeBase", kb.namespace(), &kb.name_any());
                    checked.push(once(origin, object, validate_knowledge_base(&kb)));
                }
                Ok(Manifest::Model(model)) => {
                    let object = describe("Model", model.namespace(), &model.name_any());
                    checked.push(once(origin, object, validate_model(&model)));
                }
                Ok(Manifest::McpServer(server)) => {
                    let object = describe("McpServer", server.namespace(), &server.name_any());
                    checked.push(once(origin, object, super::validation::validate_mcp_server(&server)));
                }
                Ok(Manifest::ConfigMap(config_map)) => {
                    let object = describe("ConfigMap", config_map.namespace(), &config_map.name_any());
                    checked.push(once(origin, object, validate_config_map(&config_map)));
                }
                Ok(Manifest::AgentRun(run)) => {
                    let object = describe("AgentRun", run.namespace(), &run.name_any());
                    let mut report = validate_agent_run(&run);
                    // A run named again is an update of the earlier one, as applying the files in order
                    // would make it; runs named by generateName are always new.
                    let named = run.metadata.name.as_deref().is_some_and(|n| !n.is_empty());
                    if named {
                        if let Some(earlier) = runs.get(&object) {
                            report.extend(validate_agent_run_update(earlier, &run));
                        }
                        runs.insert(object.clone(), *run);
                    }
                    checked.push(Checked { origin, object: Some(object), report, skipped: false });
                }
                Err(ManifestError::UnknownKind { api_version, kind, .. }) => checked.push(Checked {
                    origin,
                    object: Some(if kind.is_empty() && api_version.is_empty() {
                        "not a Kubernetes manifest: no apiVersion or kind".to_string()
                    } else {
                        format!("{kind} ({api_version})")
                    }),
                    report: Report::default(),
                    skipped: true,
                }),
                Err(err) => checked.push(Checked { origin, object: None, report: unreadable(err), skipped: false }),
            }
        }
    }
    let mut by_namespace: HashMap<String, Vec<Agent>> = HashMap::new();
    for (_, agent) in &agents {
        by_namespace.entry(namespace_of(agent)).or_default().push(agent.clone());
    }
    for (origin, agent) in &agents {
        let mut report = validate_agent(agent);
        report.extend(validate_agent_among(agent, &by_namespace[&namespace_of(agent)]));
        let object = Some(describe("Agent", agent.namespace(), &agent.name_any()));
        checked.push(Checked { origin: origin.clone(), object, report, skipped: false });
    }
    checked.sort_by(|a, b| a.origin.cmp(&b.origin));
    checked
}

/// The objects the local mode serves from a manifests folder.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// The Agents, in file order.
    pub agents: Vec<Agent>,
    /// The KnowledgeBases, in file order.
    pub knowledge_bases: Vec<KnowledgeBase>,
    /// The ConfigMaps (the documents of KnowledgeBases that name them), in file order.
    pub config_maps: Vec<ConfigMap>,
    /// The Models, in file order.
    pub models: Vec<super::Model>,
    /// The McpServers, in file order.
    pub mcp_servers: Vec<super::mcp_server::McpServer>,
}

/// The Agents of `files` when every document is valid (documents of other kinds and AgentRuns are
/// ignored); otherwise every problem, as `origin: field: message` lines.
pub fn load_agents(files: &[PathBuf]) -> Result<Vec<Agent>, Vec<String>> {
    load(files).map(|loaded| loaded.agents)
}

/// The Agents, KnowledgeBases, ConfigMaps and Models of `files` when every document is valid (documents
/// of other kinds and AgentRuns are ignored); otherwise every problem, as `origin: field: message` lines.
pub fn load(files: &[PathBuf]) -> Result<Loaded, Vec<String>> {
    let mut problems = Vec::new();
    for item in check_files(files) {
        for error in &item.report.errors {
            problems.push(format!("{}: {error}", item.origin));
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let mut loaded = Loaded::default();
    for file in files {
        let text = read_manifest_text(file).map_err(|e| vec![e.to_string()])?;
        for document in parse_documents(&text) {
            match document {
                Ok(Manifest::Agent(agent)) => loaded.agents.push(*agent),
                Ok(Manifest::KnowledgeBase(kb)) => loaded.knowledge_bases.push(*kb),
                Ok(Manifest::ConfigMap(config_map)) => loaded.config_maps.push(*config_map),
                Ok(Manifest::Model(model)) => loaded.models.push(*model),
                Ok(Manifest::McpServer(server)) => loaded.mcp_servers.push(*server),
                _ => {}
            }
        }
    }
    Ok(loaded)
}

fn namespace_of(agent: &Agent) -> String {
    agent.namespace().unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
}

fn unreadable(err: super::manifest::ManifestError) -> Report {
    use super::manifest::ManifestError;
    let (field, message) = match err {
        ManifestError::Field { field, message, .. } => (field, message),
        other => (".".to_string(), other.to_string()),
    };
    Report { errors: vec![FieldIssue { field, message }], warnings: Vec::new() }
}

fn origin(file: &Path, document: Option<usize>) -> String {
    match document {
        Some(n) => format!("{}#{n}", file.display()),
        None => file.display().to_string(),
    }
}

fn describe(kind: &str, namespace: Option<String>, name: &str) -> String {
    format!("{kind} {}/{name}", namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()))
}
