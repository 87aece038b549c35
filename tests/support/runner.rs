//! The `runner` binary started as the controller and the local mode start it: a subprocess with the
//! contract's files and environment.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

/// A run's files: the volumes, the manifests, and a model script.
pub struct RunFiles {
    pub dir: TempDir,
    pub run_id: String,
}

impl RunFiles {
    /// The files of a new run of the Agent `agent_yaml` (named `helper`), whose model replays `script`.
    pub fn new(agent_yaml: &str, script: &str) -> RunFiles {
        let dir = TempDir::new().expect("temp dir");
        let run_id = super::redis::unique("run");
        yuxi_operator::runner::tools::files::VolumePaths::under(dir.path()).create_all().expect("mkdir");
        std::fs::write(dir.path().join("script.yaml"), script).expect("script");
        std::fs::write(dir.path().join("agent.yaml"), agent_yaml).expect("agent");
        let run = format!(
            "apiVersion: yuxi.dev/v1alpha1\nkind: AgentRun\nmetadata:\n  name: {run_id}\nspec:\n  agent: helper\n  input: Look around.\n  threadId: {run_id}-thread\n  timeoutSeconds: 60\n"
        );
        std::fs::write(dir.path().join("run.yaml"), run).expect("run");
        RunFiles { dir, run_id }
    }

    /// A file or volume of the run.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The runner's command, its store the test Redis.
    pub fn command(&self) -> Command {
        let mut command = self.command_without_store();
        command.env("YUXI_REDIS_URL", super::redis::redis_url());
        command
    }

    /// The runner's command, its store the one served on the store socket at `socket`.
    pub fn command_on_socket(&self, socket: &Path) -> Command {
        let mut command = self.command_without_store();
        command.env("YUXI_STORE_SOCKET", socket);
        command
    }

    /// The runner's command with no store given.
    pub fn command_without_store(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_yuxi-operator"));
        command.arg("runner").arg("--run").arg(self.path("run.yaml")).arg("--agent").arg(self.path("agent.yaml"));
        for volume in ["workspace", "uploads", "outputs", "skills"] {
            command.arg(format!("--{volume}")).arg(self.path(volume));
        }
        command
            .env_remove("YUXI_REDIS_URL")
            .env_remove("YUXI_STORE_SOCKET")
            .env("YUXI_DEFAULT_MODEL", "scripted/file:script.yaml")
            .env("YUXI_SCRIPTS_DIR", self.dir.path())
            .env("OPENAI_API_KEY", "sk-secret-model-key")
            .env("YUXI_RUN_TOKEN", "run-token-secret")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("YUXI_MCP_SERVERS")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }
}

/// The manifest of the subagent `helper` with `context` (a YAML flow mapping).
pub fn subagent(context: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata:\n  name: helper\nspec:\n  backend: SubAgentBackend\n  context: {context}\n"
    )
}

/// A finished process's stderr.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
