//! The pod's volumes and each container's mounts: the claims the run's four scopes live on (at
//! sub-paths made of the run's ids, [`scope_ids`]), the skills library's claim, the inputs Secret, the
//! socket's emptyDir and each container's `/tmp`. The table of paths is in the module documentation of
//! [`super`].

use k8s_openapi::api::core::v1::{
    EmptyDirVolumeSource, PersistentVolumeClaimVolumeSource, SecretVolumeSource, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::error::PodError;
use super::settings::{SandboxSettings, settings_error};
use crate::resources::AgentRun;
use crate::resources::names::inputs_name;
use crate::run::inputs::{INPUTS_DIR, SKILLS_LIBRARY_DIR, SOCKET_DIR};
use crate::run::scope::{ID_RULE, Scope, ScopeIds, segment};

/// The run's ids that make up its volumes' sub-paths ([`ScopeIds`]: the same rule as the local mode's):
/// `spec.uid` (else the settings' `defaultUid`), `spec.threadId` (else `run_name`, the run's name) and
/// the parent's thread ids.
///
/// Errors: [`PodError::MissingUid`] when neither the run nor the settings name a user;
/// [`PodError::Settings`] for a `defaultUid` that is no path segment; [`PodError::NotAPathSegment`]
/// naming the run's field whose id is none.
pub(super) fn scope_ids(run: &AgentRun, run_name: &str, settings: &SandboxSettings) -> Result<ScopeIds, PodError> {
    let uid = match (&run.spec.uid, &settings.default_uid) {
        (Some(uid), _) => uid.clone(),
        (None, Some(uid)) => segment("defaultUid", uid).map_err(|_| {
            settings_error("defaultUid", format!("{uid:?} cannot be a path segment of the workspace: {ID_RULE}"))
        })?,
        (None, None) => return Err(PodError::MissingUid),
    };
    let (thread_field, thread_id) = match &run.spec.thread_id {
        Some(thread_id) => ("spec.threadId", thread_id.as_str()),
        None => ("metadata.name", run_name),
    };
    Ok(ScopeIds::new(&uid, thread_field, thread_id, run.spec.parent.as_ref())?)
}

fn mount(volume: &str, path: &str, sub_path: Option<String>, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: volume.to_string(),
        mount_path: path.to_string(),
        sub_path,
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

fn claim_volume(name: &str, claim: &str, read_only: bool) -> Volume {
    Volume {
        name: name.to_string(),
        persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
            claim_name: claim.to_string(),
            read_only: read_only.then_some(true),
        }),
        ..Volume::default()
    }
}

fn empty_dir(name: &str, size_limit: &Quantity, medium: Option<&str>) -> Volume {
    Volume {
        name: name.to_string(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(size_limit.clone()),
            medium: medium.map(str::to_string),
        }),
        ..Volume::default()
    }
}

/// The names of the volumes the scopes live on: one volume serves both when the skills are on the
/// user-data claim.
pub(super) struct Volumes {
    user_data: &'static str,
    skills: &'static str,
}

impl Volumes {
    /// The volume names for the settings' claims.
    pub(super) fn for_settings(settings: &SandboxSettings) -> Self {
        if settings.skills_claim == settings.user_data_claim {
            Volumes { user_data: "data", skills: "data" }
        } else {
            Volumes { user_data: "user-data", skills: "skills" }
        }
    }

    /// The pod's volumes: the claims, the inputs, the socket's folder and each container's `/tmp`.
    pub(super) fn list(&self, run: &AgentRun, settings: &SandboxSettings) -> Vec<Volume> {
        let mut volumes = vec![claim_volume(self.user_data, &settings.user_data_claim, false)];
        if self.skills != self.user_data {
            volumes.push(claim_volume(self.skills, &settings.skills_claim, false));
        }
        if let Some(library) = &settings.skills_library_claim {
            volumes.push(claim_volume("skills-library", library, true));
        }
        volumes.push(Volume {
            name: "inputs".to_string(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(inputs_name(run)),
                // Read by the runner's user only.
                default_mode: Some(0o400),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
        volumes.push(empty_dir("sockets", &Quantity("1Mi".to_string()), Some("Memory")));
        volumes.push(empty_dir("runner-tmp", &settings.tmp_size_limit, None));
        volumes.push(empty_dir("sandbox-tmp", &settings.tmp_size_limit, None));
        volumes
    }

    /// The runner's mounts: the four scopes (all writable: the runner projects the skills), the socket's
    /// folder, the inputs (read-only), the skills library (read-only, when configured) and its `/tmp`.
    pub(super) fn runner_mounts(&self, scopes: &ScopeIds, settings: &SandboxSettings) -> Vec<VolumeMount> {
        let mut mounts = self.scope_mounts(scopes, false);
        mounts.push(mount("inputs", INPUTS_DIR, None, true));
        if settings.skills_library_claim.is_some() {
            mounts.push(mount("skills-library", SKILLS_LIBRARY_DIR, None, true));
        }
        mounts.push(mount("runner-tmp", "/tmp", None, false));
        mounts
    }

    /// The sandbox's mounts: the four scopes (the skills read-only), the socket's folder and its `/tmp`.
    pub(super) fn sandbox_mounts(&self, scopes: &ScopeIds) -> Vec<VolumeMount> {
        let mut mounts = self.scope_mounts(scopes, true);
        mounts.push(mount("sandbox-tmp", "/tmp", None, false));
        mounts
    }

    /// The mounts both containers have: the four scopes (the skills read-only or not) and the socket's
    /// folder.
    fn scope_mounts(&self, scopes: &ScopeIds, skills_read_only: bool) -> Vec<VolumeMount> {
        let scope = |volume: &str, scope: Scope, read_only: bool| {
            mount(volume, scope.virtual_root(), Some(scopes.sub_path(scope)), read_only)
        };
        vec![
            scope(self.user_data, Scope::Workspace, false),
            scope(self.user_data, Scope::Uploads, false),
            scope(self.user_data, Scope::Outputs, false),
            scope(self.skills, Scope::Skills, skills_read_only),
            mount("sockets", SOCKET_DIR, None, false),
        ]
    }
}
