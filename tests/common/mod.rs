//! Helpers shared by the integration tests: the example manifests, a stand-in model endpoint, Redis, the
//! local mode, a Pod Security Standards checker.

#![allow(dead_code)]

pub mod apiserver;
pub mod local;
pub mod openai;
pub mod pss;
pub mod routes;
pub mod runner;

use std::path::{Path, PathBuf};

use yuxi_operator::resources::Agent;
use yuxi_operator::resources::manifest::{Manifest, read_manifest_file};

/// The Redis the tests use: `YUXI_TEST_REDIS_URL`, which `make test` sets after starting a server.
pub fn redis_url() -> String {
    std::env::var("YUXI_TEST_REDIS_URL")
        .expect("YUXI_TEST_REDIS_URL is not set: run the tests with `make test`, which starts a Redis server")
}

/// A fresh id for a run or thread, so tests sharing one Redis never see each other's keys.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").subsec_nanos();
    format!("{prefix}-{}-{nanos}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst))
}

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `.yaml` files directly in `dir` (relative to the root), sorted.
pub fn yaml_files(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

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
            Manifest::AgentRun(_) => None,
        })
        .collect()
}

/// Evaluates the served CRD's CEL rules for `kind` on `object` (and `old`, for an update), after pruning
/// explicit nulls as the API server does for fields that are not nullable. Returns the failing field
/// paths (without a leading dot).
pub fn cel_failures(kind: &str, object: &serde_json::Value, old: Option<&serde_json::Value>) -> Vec<String> {
    let schema = yuxi_operator::resources::crd::schema(kind).expect("a served kind");
    let object = prune_nulls(object.clone());
    let old = old.map(|o| prune_nulls(o.clone()));
    match kube::core::cel::Validator::new().validate(schema, &object, old.as_ref()) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.iter().map(|e| e.field_path.trim_start_matches('.').to_string()).collect(),
    }
}

/// Drops every null-valued field, as the API server prunes nulls of fields that are not nullable.
pub fn prune_nulls(value: serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(map) => {
            map.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, prune_nulls(v))).collect()
        }
        serde_json::Value::Array(items) => items.into_iter().map(prune_nulls).collect(),
        other => other,
    }
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
