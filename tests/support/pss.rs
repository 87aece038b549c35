//! A checker of the Pod Security Standards' `restricted` profile, which includes the `baseline` one, as
//! kubernetes.io/docs/concepts/security/pod-security-standards documents them for Kubernetes 1.33 (plus
//! the host probe rule of 1.34, which a pod made for 1.33 should meet as well). It reads a pod as JSON, so
//! it sees every field a manifest sets, and names each violation by its control and field path.
//!
//! Containers are `spec.containers`, `spec.initContainers` and `spec.ephemeralContainers`. The controls
//! the documentation marks as Linux-only (privilege escalation, seccomp, capabilities) are skipped for a
//! pod whose `spec.os.name` is `windows`, as the admission controller does.

use std::fmt;

use serde_json::Value;

/// One broken rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// The control, as the documentation names it, such as `Host Namespaces`.
    pub control: &'static str,
    /// The field path, such as `spec.containers[0].securityContext.privileged`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.control, self.field, self.message)
    }
}

/// Capabilities the baseline profile lets a container add.
const BASELINE_CAPABILITIES: [&str; 13] = [
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The safe sysctls (Kubernetes 1.33).
const SAFE_SYSCTLS: [&str; 12] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
    "net.ipv4.tcp_rmem",
    "net.ipv4.tcp_wmem",
];

/// SELinux types a pod may set.
const SELINUX_TYPES: [&str; 5] = ["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"];

/// Volume types the restricted profile allows.
const VOLUME_TYPES: [&str; 8] =
    ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"];

/// The AppArmor annotation prefix (deprecated, still checked).
const APPARMOR_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";

/// Every violation of the restricted profile by `pod` (a Pod object as JSON); empty when it passes.
pub fn check_restricted(pod: &Value) -> Vec<Violation> {
    let mut found = Vec::new();
    let mut violation = |control: &'static str, field: String, message: String| {
        found.push(Violation { control, field, message });
    };
    let null = Value::Null;
    let spec = pod.get("spec").unwrap_or(&null);
    let pod_security = spec.get("securityContext").unwrap_or(&null);
    let linux = spec.pointer("/os/name").and_then(Value::as_str) != Some("windows");
    let truthy = |v: Option<&Value>| v.and_then(Value::as_bool) == Some(true);

    let mut containers: Vec<(String, &Value)> = Vec::new();
    for list in ["containers", "initContainers", "ephemeralContainers"] {
        for (i, container) in spec.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            containers.push((format!("spec.{list}[{i}]"), container));
        }
    }
    // The security contexts: the pod's, then each container's.
    let mut contexts: Vec<(String, &Value)> = vec![("spec.securityContext".to_string(), pod_security)];
    for (path, container) in &containers {
        contexts.push((format!("{path}.securityContext"), container.get("securityContext").unwrap_or(&null)));
    }

    // Baseline: HostProcess.
    for (path, context) in &contexts {
        if truthy(context.pointer("/windowsOptions/hostProcess")) {
            violation("HostProcess", format!("{path}.windowsOptions.hostProcess"), "must not be true".into());
        }
    }
    // Baseline: Host Namespaces.
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if truthy(spec.get(field)) {
            violation("Host Namespaces", format!("spec.{field}"), "must not be true".into());
        }
    }
    for (path, container) in &containers {
        let context = container.get("securityContext").unwrap_or(&null);
        // Baseline: Privileged Containers.
        if truthy(context.get("privileged")) {
            violation("Privileged Containers", format!("{path}.securityContext.privileged"), "must not be true".into());
        }
        // Baseline: Host Ports.
        for (i, port) in container.get("ports").and_then(Value::as_array).into_iter().flatten().enumerate() {
            if port.get("hostPort").and_then(Value::as_i64).is_some_and(|p| p != 0) {
                violation(
                    "Host Ports",
                    format!("{path}.ports[{i}].hostPort"),
                    format!("must be unset or 0 (is {})", port["hostPort"]),
                );
            }
        }
        // Baseline: /proc Mount Type.
        if let Some(mount) = context.get("procMount").and_then(Value::as_str)
            && mount != "Default"
        {
            violation(
                "/proc Mount Type",
                format!("{path}.securityContext.procMount"),
                format!("must be Default (is {mount})"),
            );
        }
        // Baseline (1.34): Host Probes / Lifecycle Hooks.
        let handlers = ["livenessProbe", "readinessProbe", "startupProbe"]
            .into_iter()
            .map(|probe| (probe.to_string(), container.get(probe)))
            .chain(
                ["postStart", "preStop"]
                    .into_iter()
                    .map(|hook| (format!("lifecycle.{hook}"), container.pointer(&format!("/lifecycle/{hook}")))),
            );
        for (name, handler) in handlers {
            for kind in ["httpGet", "tcpSocket"] {
                if let Some(host) =
                    handler.and_then(|h| h.get(kind)).and_then(|k| k.get("host")).and_then(Value::as_str)
                    && !host.is_empty()
                {
                    violation(
                        "Host Probes / Lifecycle Hooks",
                        format!("{path}.{name}.{kind}.host"),
                        format!("must be unset (is {host:?})"),
                    );
                }
            }
        }
        if linux {
            // Restricted: Privilege Escalation.
            if context.get("allowPrivilegeEscalation").and_then(Value::as_bool) != Some(false) {
                violation(
                    "Privilege Escalation",
                    format!("{path}.securityContext.allowPrivilegeEscalation"),
                    "must be false".into(),
                );
            }
            // Baseline and restricted: Capabilities.
            let added: Vec<&str> = context
                .pointer("/capabilities/add")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            for capability in &added {
                if !BASELINE_CAPABILITIES.contains(capability) {
                    violation(
                        "Capabilities (baseline)",
                        format!("{path}.securityContext.capabilities.add"),
                        format!("{capability} is beyond the default set"),
                    );
                }
                if *capability != "NET_BIND_SERVICE" {
                    violation(
                        "Capabilities",
                        format!("{path}.securityContext.capabilities.add"),
                        format!("adds {capability}; only NET_BIND_SERVICE may be added"),
                    );
                }
            }
            let drops_all = context
                .pointer("/capabilities/drop")
                .and_then(Value::as_array)
                .is_some_and(|drop| drop.iter().any(|c| c.as_str() == Some("ALL")));
            if !drops_all {
                violation(
                    "Capabilities",
                    format!("{path}.securityContext.capabilities.drop"),
                    "must include ALL".into(),
                );
            }
        }
    }
    // Baseline: SELinux, AppArmor and Seccomp (never Unconfined), on the pod and every container.
    for (path, context) in &contexts {
        if let Some(options) = context.get("seLinuxOptions") {
            let kind = options.get("type").and_then(Value::as_str).unwrap_or_default();
            if !SELINUX_TYPES.contains(&kind) {
                violation("SELinux", format!("{path}.seLinuxOptions.type"), format!("{kind:?} is not an allowed type"));
            }
            for field in ["user", "role"] {
                if options.get(field).and_then(Value::as_str).is_some_and(|v| !v.is_empty()) {
                    violation("SELinux", format!("{path}.seLinuxOptions.{field}"), "must not be set".into());
                }
            }
        }
        if let Some(kind) = context.pointer("/appArmorProfile/type").and_then(Value::as_str)
            && !matches!(kind, "RuntimeDefault" | "Localhost")
        {
            violation(
                "AppArmor",
                format!("{path}.appArmorProfile.type"),
                format!("must be RuntimeDefault or Localhost (is {kind})"),
            );
        }
        if linux
            && let Some(kind) = context.pointer("/seccompProfile/type").and_then(Value::as_str)
            && !matches!(kind, "RuntimeDefault" | "Localhost")
        {
            violation(
                "Seccomp",
                format!("{path}.seccompProfile.type"),
                format!("must be RuntimeDefault or Localhost (is {kind})"),
            );
        }
    }
    for (key, value) in pod.pointer("/metadata/annotations").and_then(Value::as_object).into_iter().flatten() {
        if key.starts_with(APPARMOR_ANNOTATION) {
            let value = value.as_str().unwrap_or_default();
            if !(value.is_empty() || value == "runtime/default" || value.starts_with("localhost/")) {
                violation(
                    "AppArmor",
                    format!("metadata.annotations[{key:?}]"),
                    format!("{value:?} is not runtime/default or localhost/*"),
                );
            }
        }
    }
    // Baseline: Sysctls.
    for (i, sysctl) in pod_security.get("sysctls").and_then(Value::as_array).into_iter().flatten().enumerate() {
        let name = sysctl.get("name").and_then(Value::as_str).unwrap_or_default();
        if !SAFE_SYSCTLS.contains(&name) {
            violation(
                "Sysctls",
                format!("spec.securityContext.sysctls[{i}].name"),
                format!("{name} is not a safe sysctl"),
            );
        }
    }
    // Baseline: HostPath Volumes; restricted: Volume Types.
    for (i, volume) in spec.get("volumes").and_then(Value::as_array).into_iter().flatten().enumerate() {
        for (kind, _) in volume.as_object().into_iter().flatten().filter(|(k, v)| *k != "name" && !v.is_null()) {
            if kind == "hostPath" {
                violation("HostPath Volumes", format!("spec.volumes[{i}].hostPath"), "must not be used".into());
            }
            if !VOLUME_TYPES.contains(&kind.as_str()) {
                violation(
                    "Volume Types",
                    format!("spec.volumes[{i}].{kind}"),
                    format!("{kind} volumes are not allowed"),
                );
            }
        }
    }
    // Restricted: Running as Non-root (the pod's true covers containers that leave it unset).
    let pod_non_root = truthy(pod_security.get("runAsNonRoot"));
    if pod_security.get("runAsNonRoot").and_then(Value::as_bool) == Some(false) {
        violation("Running as Non-root", "spec.securityContext.runAsNonRoot".into(), "must be true".into());
    }
    for (path, context) in contexts.iter().skip(1) {
        match context.get("runAsNonRoot").and_then(Value::as_bool) {
            Some(false) => violation("Running as Non-root", format!("{path}.runAsNonRoot"), "must be true".into()),
            None if !pod_non_root => violation(
                "Running as Non-root",
                format!("{path}.runAsNonRoot"),
                "must be true here or in spec.securityContext".into(),
            ),
            _ => {}
        }
    }
    // Restricted: Running as Non-root user.
    for (path, context) in &contexts {
        if context.get("runAsUser").and_then(Value::as_i64) == Some(0) {
            violation("Running as Non-root user", format!("{path}.runAsUser"), "must not be 0".into());
        }
    }
    // Restricted: Seccomp must be set, on the pod or on every container.
    if linux && pod_security.pointer("/seccompProfile/type").is_none() {
        for (path, context) in contexts.iter().skip(1) {
            if context.pointer("/seccompProfile/type").is_none() {
                violation(
                    "Seccomp",
                    format!("{path}.seccompProfile.type"),
                    "must be RuntimeDefault or Localhost here or in spec.securityContext".into(),
                );
            }
        }
    }
    found
}
