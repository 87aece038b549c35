//! The example manifests of `examples/`, and what each invalid one (`examples/invalid/`) must be rejected
//! for.

use std::path::{Path, PathBuf};

use yuxi_operator::resources::Agent;
use yuxi_operator::resources::manifest::{Manifest, read_manifest_file};

use super::repository::yaml_files;

/// Every manifest of every example file in `examples/`.
pub fn example_manifests() -> Vec<(PathBuf, Manifest)> {
    yaml_files("examples")
        .into_iter()
        .flat_map(|path| {
            let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // Other files of the folder (the local mode's users file) are not manifests.
            if !text.contains("apiVersion: yuxi.dev/") {
                return Vec::new();
            }
            let manifests = read_manifest_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            manifests.into_iter().map(|m| (path.clone(), m)).collect()
        })
        .collect()
}

/// The Agents of `examples/`.
pub fn example_agents() -> Vec<Agent> {
    example_manifests()
        .into_iter()
        .filter_map(|(_, m)| match m {
            Manifest::Agent(agent) => Some(*agent),
            Manifest::AgentRun(_)
            | Manifest::KnowledgeBase(_)
            | Manifest::Model(_)
            | Manifest::ConfigMap(_)
            | Manifest::McpServer(_) => None,
        })
        .collect()
}

/// The header of an invalid example: the field it must be rejected for, and who enforces the rule
/// (`cel`, `schema`, `webhook`).
pub struct Expectation {
    pub field: String,
    pub enforced_by: Vec<String>,
}

/// Reads the `# expect-field:` and `# enforced-by:` comment lines of an invalid example.
pub fn expectation(path: &Path) -> Expectation {
    let text = std::fs::read_to_string(path).expect("readable example");
    let header = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("# {key}:")).map(|v| v.trim().to_string()))
            .unwrap_or_else(|| panic!("{} has no `# {key}:` line", path.display()))
    };
    Expectation {
        field: header("expect-field"),
        enforced_by: header("enforced-by").split(',').map(|s| s.trim().to_string()).collect(),
    }
}
