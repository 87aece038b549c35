//! A warm pod's claim (docs/concepts/warm-pools.md): what the controller hands the runner of an idle
//! sandbox pod when a run claims it, and the rules the runner checks it by. Pure.
//!
//! An idle pod's runner (`yuxi-operator runner --await-claim`) holds no run: no AgentRun, no inputs, no
//! run token. It waits on its pod's claim key in the run store ([`crate::store::keys::pod_claim`], the
//! pod's uid, which it reads from the downward API). The controller claims the pod for one run (a patch
//! of its labels and owner, with the pod's `resourceVersion` as a precondition, so two runs cannot both
//! win), then pushes one [`Claim`] there; the runner takes it (a pop: nobody reads it twice), writes its
//! files where a cold pod's inputs Secret would be mounted, and runs the run as a cold pod's runner does.
//! Its pod ends with the run (`restartPolicy: Never`), so it never serves a second one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::inputs::{AGENT_KEY, MCP_SERVERS_KEY, MODEL_KEY, RUN_KEY};

/// The environment variable holding the pod's uid (from the downward API, `metadata.uid`).
pub const POD_UID_ENV: &str = "YUXI_POD_UID";

/// The most bytes a claim may hold (its files and token, as JSON): the inputs Secret's own limit.
pub const MAX_CLAIM_BYTES: usize = 1024 * 1024;

/// The files a claim may carry, the keys of a cold pod's inputs Secret; nothing else is written.
pub const CLAIM_FILES: [&str; 4] = [RUN_KEY, AGENT_KEY, MODEL_KEY, MCP_SERVERS_KEY];

/// What a claimed pod's runner is handed: the run's inputs, as a cold pod's inputs Secret holds them,
/// and its token for the facade, when its run has credentials.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claim {
    /// The run the pod was claimed for (its AgentRun's name), which `run.yaml` must name too.
    pub run: String,
    /// The inputs: file name ([`CLAIM_FILES`]) to text.
    pub files: BTreeMap<String, String>,
    /// The run's bearer token for the facade (a `yxr_` token), when its starter gave it credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// Why a claim was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ClaimError {
    /// Larger than [`MAX_CLAIM_BYTES`].
    #[error("the claim holds {0} bytes, more than the {MAX_CLAIM_BYTES} allowed")]
    TooLarge(usize),
    /// Not the JSON of a [`Claim`].
    #[error("the claim is not readable: {0}")]
    Unreadable(String),
    /// A file name outside [`CLAIM_FILES`].
    #[error("the claim names the file {0:?}, which is not an input")]
    UnknownFile(String),
    /// Without `run.yaml` or `agent.yaml`.
    #[error("the claim has no {0}")]
    MissingFile(&'static str),
}

impl Claim {
    /// The claim in `text`, checked: at most [`MAX_CLAIM_BYTES`], only the files of [`CLAIM_FILES`],
    /// with the run and agent manifests.
    pub fn parse(text: &str) -> Result<Claim, ClaimError> {
        if text.len() > MAX_CLAIM_BYTES {
            return Err(ClaimError::TooLarge(text.len()));
        }
        let claim: Claim = serde_json::from_str(text).map_err(|e| ClaimError::Unreadable(e.to_string()))?;
        if let Some(name) = claim.files.keys().find(|name| !CLAIM_FILES.contains(&name.as_str())) {
            return Err(ClaimError::UnknownFile(name.clone()));
        }
        for required in [RUN_KEY, AGENT_KEY] {
            if !claim.files.contains_key(required) {
                return Err(ClaimError::MissingFile(required));
            }
        }
        Ok(claim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(files: &[(&str, &str)]) -> String {
        let files = files.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        serde_json::to_string(&Claim { run: "r1".into(), files, token: Some("yxr_x".into()) }).expect("json")
    }

    #[test]
    fn a_claim_with_the_run_and_agent_is_read_whole() {
        let parsed = Claim::parse(&claim(&[(RUN_KEY, "a"), (AGENT_KEY, "b"), (MODEL_KEY, "c")])).expect("claim");
        assert_eq!(parsed.files.len(), 3);
        assert_eq!(parsed.token.as_deref(), Some("yxr_x"));
    }

    #[test]
    fn a_claim_naming_a_file_outside_the_inputs_is_refused() {
        let text = claim(&[(RUN_KEY, "a"), (AGENT_KEY, "b"), ("../etc/passwd", "x")]);
        assert_eq!(Claim::parse(&text), Err(ClaimError::UnknownFile("../etc/passwd".into())));
    }

    #[test]
    fn a_claim_without_the_run_or_too_large_is_refused() {
        assert_eq!(Claim::parse(&claim(&[(AGENT_KEY, "b")])), Err(ClaimError::MissingFile(RUN_KEY)));
        let big = claim(&[(RUN_KEY, &"x".repeat(MAX_CLAIM_BYTES)), (AGENT_KEY, "b")]);
        assert!(matches!(Claim::parse(&big), Err(ClaimError::TooLarge(_))));
        assert!(matches!(Claim::parse("{"), Err(ClaimError::Unreadable(_))));
    }
}
