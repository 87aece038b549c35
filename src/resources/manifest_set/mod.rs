//! Checking a set of manifest files together, as `yuxi-operator validate` and the local mode do: every
//! object by its own rules (Agents, AgentRuns, KnowledgeBases, Models, McpServers, ConfigMaps), every
//! Agent against the other Agents of its namespace among the files (the rules the webhook checks against
//! the cluster), and the names every Agent declares against the objects the files and their
//! surroundings hold. [`follow`] keeps a folder's last good version of each file in force as it changes.

pub mod follow;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use kube::ResourceExt;

use super::manifest::{Manifest, ManifestError, parse_documents, read_manifest_text};
use super::validation::{
    FieldIssue, Known, Report, Severity, check_references, validate_agent, validate_agent_run,
    validate_agent_run_update, validate_config_map, validate_default_among, validate_knowledge_base, validate_model,
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

/// One document of one manifest file, as read.
#[derive(Debug)]
pub struct Document {
    /// The file.
    pub file: PathBuf,
    /// `path` or `path#N` for the N-th document of a multi-document file.
    pub origin: String,
    /// The object, or why it could not be read.
    pub parsed: Result<Manifest, ManifestError>,
}

/// Every document of `files`, in order; a file that cannot be read is one document with its error.
pub fn read_documents(files: &[PathBuf]) -> Vec<Document> {
    files.iter().flat_map(|file| file_documents(file)).collect()
}

/// The documents of one file.
fn file_documents(file: &Path) -> Vec<Document> {
    let documents = match read_manifest_text(file) {
        Ok(text) => parse_documents(&text),
        Err(err) => vec![Err(err)],
    };
    let many = documents.len() > 1;
    documents
        .into_iter()
        .enumerate()
        .map(|(i, parsed)| Document { file: file.to_path_buf(), origin: origin(file, many.then_some(i + 1)), parsed })
        .collect()
}

/// What the Agents of a set of files are checked against besides the files' own objects, and how an
/// unknown name counts there.
#[derive(Clone, Debug)]
pub struct Surroundings {
    /// Whether an unknown knowledge base, skill, Model, MCP server or subagent is an error (the set is
    /// complete: `validate`, the local mode) or a warning (more objects are applied elsewhere).
    pub severity: Severity,
    /// The skills library's skills; `None` leaves skills unchecked.
    pub skills: Option<Vec<String>>,
    /// Agents outside the files (the local mode's, created through the API), as subagents to name.
    pub agents: Vec<Agent>,
    /// Knowledge bases outside the files (the local mode's, created through the API), by slug.
    pub knowledge_bases: Vec<String>,
    /// MCP servers configured outside the files (`YUXI_MCP_SERVERS`), by name.
    pub mcp_servers: Vec<String>,
}

impl Default for Surroundings {
    /// Nothing outside the files, unknown names refused, skills unchecked.
    fn default() -> Self {
        Self {
            severity: Severity::Refuse,
            skills: None,
            agents: Vec::new(),
            knowledge_bases: Vec::new(),
            mcp_servers: Vec::new(),
        }
    }
}

/// Reads and checks every document of `files` ([`check_documents`]).
pub fn check_files(files: &[PathBuf], around: &Surroundings) -> Vec<Checked> {
    check_documents(&read_documents(files), around)
}

/// Checks every document, in order. Agents are also checked against the other Agents of their
/// namespace among the documents (the webhook's rules) and their names against the documents' objects
/// of their namespace and `around` ([`check_references`]); an AgentRun named again is checked as an
/// update of the earlier one. Documents of other kinds are reported as skipped (a GitOps folder holds
/// more than these kinds); a document that cannot be read gives one finding naming the document and
/// field.
pub fn check_documents(documents: &[Document], around: &Surroundings) -> Vec<Checked> {
    let mut checked = Vec::new();
    let mut agents: Vec<(&str, &Agent)> = Vec::new();
    let mut runs: HashMap<String, &AgentRun> = HashMap::new();
    // The knowledge bases, ConfigMaps and Models seen, each as `describe` names it (kind included).
    let mut declared: std::collections::HashSet<String> = std::collections::HashSet::new();
    // Checked once for its kind, and named twice among the files is an error.
    let mut once = |origin: &str, object: String, mut report: Report| {
        if !declared.insert(object.clone()) {
            report.error("metadata.name", format!("{object} is declared twice among the files"));
        }
        Checked { origin: origin.to_string(), object: Some(object), report, skipped: false }
    };
    // What the Agents of each namespace may name.
    let mut known: HashMap<String, Known> = HashMap::new();
    let mut servers = Vec::new();
    for document in documents {
        let origin = document.origin.as_str();
        match &document.parsed {
            Ok(Manifest::Agent(agent)) => agents.push((origin, agent)),
            Ok(Manifest::KnowledgeBase(kb)) => {
                let object = describe("KnowledgeBase", kb.namespace(), &kb.name_any());
                known_in(&mut known, kb.namespace()).knowledge_bases.get_or_insert_default().push(kb.name_any());
                let mut report = validate_knowledge_base(kb);
                if around.knowledge_bases.contains(&kb.name_any()) {
                    report.error(
                        "metadata.name",
                        format!(
                            "knowledge base {:?} was created through the API; a manifest cannot take its slug",
                            kb.name_any()
                        ),
                    );
                }
                checked.push(once(origin, object, report));
            }
            Ok(Manifest::Model(model)) => {
                let object = describe("Model", model.namespace(), &model.name_any());
                known_in(&mut known, model.namespace()).models.get_or_insert_default().push(model.name_any());
                checked.push(once(origin, object, validate_model(model)));
            }
            Ok(Manifest::McpServer(server)) => {
                let object = describe("McpServer", server.namespace(), &server.name_any());
                servers.push(server.as_ref());
                checked.push(once(origin, object, super::validation::validate_mcp_server(server)));
            }
            Ok(Manifest::ConfigMap(config_map)) => {
                let object = describe("ConfigMap", config_map.namespace(), &config_map.name_any());
                checked.push(once(origin, object, validate_config_map(config_map)));
            }
            Ok(Manifest::AgentRun(run)) => {
                let object = describe("AgentRun", run.namespace(), &run.name_any());
                let mut report = validate_agent_run(run);
                // A run named again is an update of the earlier one, as applying the files in order
                // would make it; runs named by generateName are always new.
                let named = run.metadata.name.as_deref().is_some_and(|n| !n.is_empty());
                if named {
                    if let Some(earlier) = runs.get(&object) {
                        report.extend(validate_agent_run_update(earlier, run));
                    }
                    runs.insert(object.clone(), run);
                }
                checked.push(Checked { origin: origin.to_string(), object: Some(object), report, skipped: false });
            }
            Err(ManifestError::UnknownKind { api_version, kind, .. }) => checked.push(Checked {
                origin: origin.to_string(),
                object: Some(if kind.is_empty() && api_version.is_empty() {
                    "not a Kubernetes manifest: no apiVersion or kind".to_string()
                } else {
                    format!("{kind} ({api_version})")
                }),
                report: Report::default(),
                skipped: true,
            }),
            Err(err) => checked.push(Checked {
                origin: origin.to_string(),
                object: None,
                report: unreadable(err),
                skipped: false,
            }),
        }
    }
    let mut by_namespace: HashMap<String, Vec<Agent>> = HashMap::new();
    for (_, agent) in &agents {
        by_namespace.entry(namespace_of(agent)).or_default().push((*agent).clone());
    }
    // What an Agent of each namespace may name, made once per namespace.
    let mut names_in: HashMap<String, Known> = HashMap::new();
    let saved: std::collections::HashSet<String> = around.agents.iter().map(|a| a.name_any()).collect();
    let mut agents_seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    for (origin, agent) in &agents {
        let namespace = namespace_of(agent);
        let mut report = validate_agent(agent);
        let object = describe("Agent", agent.namespace(), &agent.name_any());
        if !agents_seen.insert(object.clone()) {
            report.error("metadata.name", format!("{object} is declared twice among the files"));
        }
        if saved.contains(&agent.name_any()) {
            report.error(
                "metadata.name",
                format!("agent {:?} was created through the API; a manifest cannot take its slug", agent.name_any()),
            );
        }
        let among = &by_namespace[&namespace];
        // The default agent is one among the files and the agents created through the API.
        report.extend(validate_default_among(agent, among));
        report.extend(validate_default_among(agent, &around.agents));
        let names = names_in
            .entry(namespace.clone())
            .or_insert_with(|| names_of(&namespace, known.get(&namespace), among, &servers, around));
        report.extend(check_references(agent, names, around.severity));
        checked.push(Checked { origin: origin.to_string(), object: Some(object), report, skipped: false });
    }
    checked.sort_by(|a, b| a.origin.cmp(&b.origin));
    checked
}

/// What an Agent of `namespace` may name: the knowledge bases and Models of its namespace among the files
/// (`declared`), those of `around`, the McpServers of the files it may use, and the subagents among the
/// namespace's Agents and `around`'s.
fn names_of(
    namespace: &str,
    declared: Option<&Known>,
    among: &[Agent],
    servers: &[&super::mcp_server::McpServer],
    around: &Surroundings,
) -> Known {
    let mut names = declared.cloned().unwrap_or_default();
    names.knowledge_bases.get_or_insert_default().extend(around.knowledge_bases.iter().cloned());
    names.models.get_or_insert_default();
    names.skills = around.skills.clone();
    let mut mcp = around.mcp_servers.clone();
    mcp.extend(servers.iter().filter_map(|server| {
        let home = server.namespace().unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        match home == namespace {
            true => Some(server.name_any()),
            false => server.spec.allows_namespace(namespace).then(|| format!("{home}/{}", server.name_any())),
        }
    }));
    names.mcp_servers = Some(mcp);
    let mut subagents = Known::subagents_of(among);
    subagents.extend(Known::subagents_of(&around.agents));
    names.subagents = Some(subagents);
    names
}

/// The names known in `namespace` (the default one when `None`).
fn known_in(known: &mut HashMap<String, Known>, namespace: Option<String>) -> &mut Known {
    known.entry(namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())).or_default()
}

/// The skills of the skills library `dir`: its sub-folders holding a `SKILL.md` file, sorted (at most
/// 10,000 entries of the folder are read). A missing folder has none.
pub fn library_skills(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut skills: Vec<String> = entries
        .take(10_000)
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.path().join("SKILL.md").is_file())
        .filter_map(|entry| entry.file_name().to_str().map(str::to_string))
        .filter(|name| !name.starts_with('.'))
        .collect();
    skills.sort();
    skills
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
pub fn load_agents(files: &[PathBuf], around: &Surroundings) -> Result<Vec<Agent>, Vec<String>> {
    load(files, around).map(|loaded| loaded.agents)
}

/// The Agents, KnowledgeBases, ConfigMaps, Models and McpServers of `files` when every document is
/// valid among them and `around` (documents of other kinds and AgentRuns are ignored); otherwise every
/// problem, as `origin: field: message` lines.
pub fn load(files: &[PathBuf], around: &Surroundings) -> Result<Loaded, Vec<String>> {
    valid_documents(files, around).map(|documents| Loaded::from_documents(&documents))
}

/// Every document of `files` when all are valid among them and `around`; otherwise every problem, as
/// `origin: field: message` lines.
pub fn valid_documents(files: &[PathBuf], around: &Surroundings) -> Result<Vec<Document>, Vec<String>> {
    let documents = read_documents(files);
    let problems: Vec<String> = check_documents(&documents, around)
        .iter()
        .flat_map(|item| item.report.errors.iter().map(move |error| format!("{}: {error}", item.origin)))
        .collect();
    match problems.is_empty() {
        true => Ok(documents),
        false => Err(problems),
    }
}

impl Loaded {
    /// The objects among `documents` that were read (AgentRuns and other kinds left out).
    pub fn from_documents(documents: &[Document]) -> Self {
        let mut loaded = Loaded::default();
        for document in documents {
            match &document.parsed {
                Ok(Manifest::Agent(agent)) => loaded.agents.push((**agent).clone()),
                Ok(Manifest::KnowledgeBase(kb)) => loaded.knowledge_bases.push((**kb).clone()),
                Ok(Manifest::ConfigMap(config_map)) => loaded.config_maps.push((**config_map).clone()),
                Ok(Manifest::Model(model)) => loaded.models.push((**model).clone()),
                Ok(Manifest::McpServer(server)) => loaded.mcp_servers.push((**server).clone()),
                _ => {}
            }
        }
        loaded
    }
}

fn namespace_of(agent: &Agent) -> String {
    agent.namespace().unwrap_or_else(|| DEFAULT_NAMESPACE.to_string())
}

fn unreadable(err: &ManifestError) -> Report {
    let (field, message) = match err {
        ManifestError::Field { field, message, .. } => (field.clone(), message.clone()),
        other => (".".to_string(), other.to_string()),
    };
    Report { errors: vec![FieldIssue { field, message }], warnings: Vec::new() }
}

pub(crate) fn origin(file: &Path, document: Option<usize>) -> String {
    match document {
        Some(n) => format!("{}#{n}", file.display()),
        None => file.display().to_string(),
    }
}

fn describe(kind: &str, namespace: Option<String>, name: &str) -> String {
    format!("{kind} {}/{name}", namespace.unwrap_or_else(|| DEFAULT_NAMESPACE.to_string()))
}
