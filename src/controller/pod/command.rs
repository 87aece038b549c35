//! The `sandbox-pod` command's work, the one part of the pod builder that reads files: the AgentRun, the
//! Agent and the settings from their files, checked by the admission rules, built by [`sandbox_objects`]
//! and written by [`to_yaml`] or [`to_json`].

use std::path::{Path, PathBuf};

use super::settings::SandboxSettings;
use super::{PodError, SandboxObjects, sandbox_objects, to_json, to_yaml};
use crate::resources::manifest::{Manifest, ManifestError, read_manifest_file, read_manifest_text};
use crate::resources::validation::{validate_agent, validate_agent_run};

/// Why `sandbox-pod` printed nothing. Each error shows as one line, `<file>: <problem>`, naming the file
/// the problem is in (the command prints it after `error: `).
#[derive(Debug, thiserror::Error)]
pub enum SandboxPodError {
    /// A file cannot be read or does not hold manifests (its YAML, or a manifest's fields, are wrong).
    #[error("{}: {source}", file.display())]
    Read {
        /// The file.
        file: PathBuf,
        /// What is wrong with it.
        source: ManifestError,
    },
    /// The run file does not hold exactly one AgentRun, or the agent file exactly one Agent.
    #[error("{}: must hold exactly one {kind}", file.display())]
    NotOne {
        /// The file.
        file: PathBuf,
        /// The kind it must hold: `AgentRun` or `Agent`.
        kind: &'static str,
    },
    /// The AgentRun or the Agent breaks an admission rule.
    #[error("{}: {summary}", file.display())]
    Invalid {
        /// The file.
        file: PathBuf,
        /// The broken rules, each naming its field ([`Report::error_summary`](crate::resources::validation::Report::error_summary)).
        summary: String,
    },
    /// The settings file is not YAML of [`SandboxSettings`].
    #[error("{}: {message}", file.display())]
    Settings {
        /// The settings file.
        file: PathBuf,
        /// The field at fault and the problem ([`SandboxSettings::from_yaml`]).
        message: String,
    },
    /// No pod can be built from the run, the agent and the settings.
    #[error("{}: {source}", file.as_deref().map_or_else(|| "the default settings".into(), |file| file.display().to_string()))]
    Pod {
        /// The file the field at fault is read from (the run file, the agent file or the settings file);
        /// none: the default settings.
        file: Option<PathBuf>,
        /// Why, naming the field.
        source: PodError,
    },
    /// The objects cannot be written as YAML (not expected for built objects).
    #[error(transparent)]
    Encode(PodError),
}

/// How `sandbox-pod` writes the two objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SandboxPodOutput {
    /// [`to_yaml`]: the pod, `---`, the inputs Secret.
    #[default]
    Yaml,
    /// [`to_json`]: one `v1` `List` of the two.
    Json,
}

/// The `sandbox-pod` command's work: reads the AgentRun manifest `run_file`, the Agent manifest
/// `agent_file` and the settings file `settings_file` (YAML of [`SandboxSettings`]; none: the defaults),
/// checks the run and the agent by the admission rules, and returns their [`sandbox_objects`] written as
/// `output` says.
///
/// Errors ([`SandboxPodError`], naming the file and the field): a file that cannot be read, is not YAML,
/// does not hold exactly one AgentRun (or Agent), breaks an admission rule, or cannot give a pod
/// ([`PodError`]).
pub fn sandbox_pod_text(
    run_file: &Path,
    agent_file: &Path,
    settings_file: Option<&Path>,
    output: SandboxPodOutput,
) -> Result<String, SandboxPodError> {
    let objects = read_objects(run_file, agent_file, settings_file)?;
    match output {
        SandboxPodOutput::Yaml => to_yaml(&objects),
        SandboxPodOutput::Json => to_json(&objects),
    }
    .map_err(SandboxPodError::Encode)
}

fn read_objects(
    run_file: &Path,
    agent_file: &Path,
    settings_file: Option<&Path>,
) -> Result<SandboxObjects, SandboxPodError> {
    let read = |file: &Path| {
        read_manifest_file(file).map_err(|source| SandboxPodError::Read { file: file.to_path_buf(), source })
    };
    let not_one = |file: &Path, kind| SandboxPodError::NotOne { file: file.to_path_buf(), kind };
    let invalid = |file: &Path, summary| SandboxPodError::Invalid { file: file.to_path_buf(), summary };

    let run = match read(run_file)?.as_slice() {
        [Manifest::AgentRun(run)] => (**run).clone(),
        _ => return Err(not_one(run_file, "AgentRun")),
    };
    let report = validate_agent_run(&run);
    if !report.is_ok() {
        return Err(invalid(run_file, report.error_summary()));
    }
    let agent = match read(agent_file)?.as_slice() {
        [Manifest::Agent(agent)] => (**agent).clone(),
        _ => return Err(not_one(agent_file, "Agent")),
    };
    let report = validate_agent(&agent);
    if !report.is_ok() {
        return Err(invalid(agent_file, report.error_summary()));
    }
    let settings = match settings_file {
        Some(path) => {
            let text = read_manifest_text(path)
                .map_err(|source| SandboxPodError::Read { file: path.to_path_buf(), source })?;
            SandboxSettings::from_yaml(&text)
                .map_err(|err| SandboxPodError::Settings { file: path.to_path_buf(), message: err.to_string() })?
        }
        None => SandboxSettings::default(),
    };
    sandbox_objects(&run, &agent, &settings).map_err(|source| {
        let file = match &source {
            PodError::Settings { .. } => settings_file,
            PodError::AgentMismatch { .. } => Some(agent_file),
            _ => Some(run_file),
        };
        SandboxPodError::Pod { file: file.map(Path::to_path_buf), source }
    })
}
