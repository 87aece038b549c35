//! The local mode over the examples plus agents of a test's own, with the examples' scripts plus the
//! test's scripts.

use tempfile::TempDir;

use super::local_mode::{Local, LocalStore, command_over, free_port, launch};
use super::repository::yaml_files;

/// The local mode over `examples/` and `agents` (`(slug, manifest)`), its scripts folder holding the
/// examples' scripts and `scripts` (`(slug, script)`, each as `<slug>.yaml`), the default model
/// `scripted/auto`, keeping runs in `store`, its data in `data`. Returns it and its manifests folder (kept
/// while it runs).
pub async fn start_with(
    store: LocalStore,
    data: TempDir,
    agents: &[(&str, &str)],
    scripts: &[(&str, &str)],
) -> (Local, TempDir) {
    start_with_env(store, data, agents, scripts, &[]).await
}

/// [`start_with`], the local mode's environment holding `env` too.
pub async fn start_with_env(
    store: LocalStore,
    data: TempDir,
    agents: &[(&str, &str)],
    scripts: &[(&str, &str)],
    env: &[(&str, &str)],
) -> (Local, TempDir) {
    let manifests = TempDir::new().expect("dir");
    for file in yaml_files("examples") {
        std::fs::copy(&file, manifests.path().join(file.file_name().expect("name"))).expect("copy");
    }
    for (slug, manifest) in agents {
        std::fs::write(manifests.path().join(format!("{slug}.yaml")), manifest).expect("write");
    }
    let scripts_dir = TempDir::new().expect("dir");
    for file in yaml_files("examples/scripts") {
        std::fs::copy(&file, scripts_dir.path().join(file.file_name().expect("name"))).expect("copy");
    }
    for (slug, script) in scripts {
        std::fs::write(scripts_dir.path().join(format!("{slug}.yaml")), script).expect("write");
    }
    let port = free_port();
    let mut command = command_over(manifests.path(), store, port, data.path());
    command.args(["--default-model", "scripted/auto", "--scripts-dir"]).arg(scripts_dir.path());
    command.envs(env.iter().copied());
    (launch(command, port, data, scripts_dir).await, manifests)
}

/// A main agent every user may use, that may delegate to no subagent.
pub fn main_agent(slug: &str) -> String {
    format!(
        "apiVersion: yuxi.dev/v1alpha1\nkind: Agent\nmetadata: {{name: {slug}}}\nspec:\n  backend: ChatbotAgent\n  context: {{subagents: []}}\n  share: {{readScope: {{accessLevel: Global}}}}\n"
    )
}
