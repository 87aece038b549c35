//! The official SDKs' Python clients and servers as peers of the facade: the scenarios of
//! `tests/mcp/client.py` (the MCP SDK, pinned by `scripts/mcp-venv`) and `tests/a2a/client.py` (the A2A
//! SDK, pinned by `scripts/a2a-venv`), each run in its own process.

use std::path::PathBuf;
use std::process::Command;

use super::repository::root;

/// An SDK whose Python environment runs the scenarios.
#[derive(Clone, Copy)]
pub enum Sdk {
    /// MCP's: `YUXI_MCP_PYTHON`, else `scripts/mcp-venv`.
    Mcp,
    /// A2A's: `YUXI_A2A_PYTHON`, else `scripts/a2a-venv`.
    A2a,
}

impl Sdk {
    fn parts(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Sdk::Mcp => ("YUXI_MCP_PYTHON", "scripts/mcp-venv", "tests/mcp/client.py"),
            Sdk::A2a => ("YUXI_A2A_PYTHON", "scripts/a2a-venv", "tests/a2a/client.py"),
        }
    }

    /// The python of the SDK's venv: its variable (as `make test` sets it), else what its script makes
    /// (installing the pinned SDK when it is missing).
    pub fn python(self) -> PathBuf {
        let (variable, script, _) = self.parts();
        if let Some(python) = std::env::var_os(variable) {
            return PathBuf::from(python);
        }
        let output = Command::new(root().join(script)).output().expect("the venv script runs");
        assert!(output.status.success(), "{script}: {}", String::from_utf8_lossy(&output.stderr));
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    }
}

/// Runs the MCP `scenario` against the facade at `base`, with `env` ([`sdk_scenario`]).
pub async fn scenario(scenario: &str, base: &str, env: &[(&str, &str)]) -> String {
    sdk_scenario(Sdk::Mcp, scenario, base, env).await
}

/// Runs `scenario` of `sdk`'s client script against the facade at `base`, with `env`; panics with its
/// output when it fails. Returns what it printed before its `ok` line.
pub async fn sdk_scenario(sdk: Sdk, scenario: &str, base: &str, env: &[(&str, &str)]) -> String {
    let (_, _, client) = sdk.parts();
    let mut command = tokio::process::Command::new(sdk.python());
    command.arg(root().join(client)).args([scenario, base]);
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
        "{client} scenario {scenario} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout.lines().filter(|l| !l.starts_with("ok ")).collect::<Vec<_>>().join("\n")
}
