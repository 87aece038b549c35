//! The pod's and the containers' security contexts: the restricted Pod Security Standard (non-root with
//! the settings' fixed uid, gid and fsGroup, seccomp `RuntimeDefault`, no privilege escalation, every
//! capability dropped) and read-only root filesystems.

use k8s_openapi::api::core::v1::{Capabilities, PodSecurityContext, SeccompProfile, SecurityContext};

use super::settings::SandboxSettings;

/// The pod's hardening: non-root as the settings' `runAsUser`, `runAsGroup` and `fsGroup` (the volumes'
/// group, changed only when the root of a volume does not already have it), seccomp `RuntimeDefault`.
pub(crate) fn pod_security(settings: &SandboxSettings) -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(settings.run_as_user),
        run_as_group: Some(settings.run_as_group),
        fs_group: Some(settings.fs_group),
        fs_group_change_policy: Some("OnRootMismatch".to_string()),
        seccomp_profile: Some(SeccompProfile { type_: "RuntimeDefault".to_string(), localhost_profile: None }),
        ..PodSecurityContext::default()
    }
}

/// A container's hardening: the restricted Pod Security Standard, and a read-only root filesystem.
pub(crate) fn container_security() -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        capabilities: Some(Capabilities { drop: Some(vec!["ALL".to_string()]), add: None }),
        read_only_root_filesystem: Some(true),
        run_as_non_root: Some(true),
        ..SecurityContext::default()
    }
}
