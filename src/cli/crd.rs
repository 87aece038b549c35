//! `yuxi-operator crd`: prints the CustomResourceDefinitions (the files under `crds/` are its output).

use std::path::PathBuf;
use std::process::ExitCode;

use yuxi_operator::resources::crd;

/// Where the CRDs go.
#[derive(clap::Args)]
pub struct CrdArgs {
    /// Write `agent.yaml`, `agentrun.yaml`, `knowledgebase.yaml` and `model.yaml` into this folder instead of printing them.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

/// Prints the CRDs as one YAML stream on stdout, or writes one file per CRD into `--out-dir`.
/// Exit status 1 when a file cannot be written.
pub fn run(args: CrdArgs) -> ExitCode {
    match args.out_dir {
        None => {
            print!("{}", crd::crds_yaml());
            ExitCode::SUCCESS
        }
        Some(dir) => {
            for (name, yaml) in crd::crd_files() {
                let path = dir.join(name);
                if let Err(err) = std::fs::write(&path, yaml) {
                    eprintln!("error: cannot write {}: {err}", path.display());
                    return ExitCode::FAILURE;
                }
            }
            ExitCode::SUCCESS
        }
    }
}
