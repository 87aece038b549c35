//! `yuxi-operator sandbox-pod`: prints the pod (and its inputs Secret) an AgentRun would get, for a
//! user to inspect before applying.

use std::path::PathBuf;
use std::process::ExitCode;

/// The run, its agent and the sandbox settings to build the pod from.
#[derive(clap::Args)]
pub struct SandboxPodArgs {
    /// The AgentRun manifest.
    #[arg(long, value_name = "FILE")]
    run: PathBuf,
    /// The Agent manifest the run names.
    #[arg(long, value_name = "FILE")]
    agent: PathBuf,
    /// The sandbox settings (YAML, camelCase); without it, the defaults.
    #[arg(long, value_name = "FILE")]
    settings: Option<PathBuf>,
}

/// Prints the pod, then `---` and the Secret of its inputs, as YAML on stdout. Exit status 1 with the reason on
/// stderr when a manifest or the settings cannot be read or the pod cannot be built.
pub fn run(args: SandboxPodArgs) -> ExitCode {
    match yuxi_operator::controller::pod::sandbox_pod_yaml(&args.run, &args.agent, args.settings.as_deref()) {
        Ok(yaml) => {
            // A closed pipe (`| head`) ends the listing, not the process.
            let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), yaml.as_bytes());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
