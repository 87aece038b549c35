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
    /// yaml: the pod, `---`, the Secret; json: one `v1` `List` of the two.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Yaml)]
    output: Output,
}

/// The `--output` formats.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Output {
    Yaml,
    Json,
}

/// Prints the pod, then `---` and the Secret of its inputs, as YAML on stdout (or both in one JSON `List`).
/// Exit status 1 with the reason on stderr when a manifest or the settings cannot be read or the pod cannot
/// be built.
pub fn run(args: SandboxPodArgs) -> ExitCode {
    use yuxi_operator::controller::pod::{SandboxPodOutput, sandbox_pod_text};
    let output = match args.output {
        Output::Yaml => SandboxPodOutput::Yaml,
        Output::Json => SandboxPodOutput::Json,
    };
    match sandbox_pod_text(&args.run, &args.agent, args.settings.as_deref(), output) {
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
