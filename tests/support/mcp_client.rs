//! The official MCP Python SDK as a client of the facade's `/mcp`: the scenarios of
//! `tests/mcp/client.py`, each run in its own process with the SDK pinned by `scripts/mcp-venv`.

use std::path::PathBuf;
use std::process::Command;

use super::repository::root;

/// The python of the SDK's venv: `YUXI_MCP_PYTHON` (as `make test` sets it), else what
/// `scripts/mcp-venv` makes (installing the pinned SDK when it is missing).
fn python() -> PathBuf {
    if let Some(python) = std::env::var_os("YUXI_MCP_PYTHON") {
        return PathBuf::from(python);
    }
    let output = Command::new(root().join("scripts/mcp-venv")).output().expect("scripts/mcp-venv runs");
    assert!(output.status.success(), "scripts/mcp-venv: {}", String::from_utf8_lossy(&output.stderr));
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// Runs `scenario` against the facade at `base`, with `env`; panics with its output when it fails.
/// Returns what it printed before its `ok` line.
pub async fn scenario(scenario: &str, base: &str, env: &[(&str, &str)]) -> String {
    let mut command = tokio::process::Command::new(python());
    command.arg(root().join("tests/mcp/client.py")).args([scenario, base]);
    for (name, value) in env {
        command.env(name, value);
    }
    let output = tokio::time::timeout(std::time::Duration::from_secs(180), command.output())
        .await
        .expect("the scenario ends within 180 s")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success() && stdout.lines().last() == Some(&format!("ok {scenario}")),
        "MCP scenario {scenario} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.lines().filter(|l| !l.starts_with("ok ")).collect::<Vec<_>>().join("\n")
}
