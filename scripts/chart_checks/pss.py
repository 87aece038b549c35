"""A checker of the Pod Security Standards' `restricted` profile, which includes the `baseline` one, as
kubernetes.io/docs/concepts/security/pod-security-standards documents them for Kubernetes 1.33 (plus the
host probe rule of 1.34, which a pod made for 1.33 should meet as well). It reads a pod as a dict (parsed
YAML or JSON), so it sees every field a manifest sets, and names each violation by its control and field
path.

The same rules as tests/support/pss.rs, written again here so that the chart checks need no Rust.

Containers are `spec.containers`, `spec.initContainers` and `spec.ephemeralContainers`. The controls the
documentation marks as Linux-only (privilege escalation, seccomp, capabilities) are skipped for a pod whose
`spec.os.name` is `windows`, as the admission controller does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Violation:
    """One broken rule."""

    # The control, as the documentation names it, such as `Host Namespaces`.
    control: str
    # The field path, such as `spec.containers[0].securityContext.privileged`.
    field: str
    # What is wrong.
    message: str

    def __str__(self) -> str:
        return f"{self.control}: {self.field}: {self.message}"


# Capabilities the baseline profile lets a container add.
BASELINE_CAPABILITIES = frozenset(
    [
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
    ]
)

# The safe sysctls (Kubernetes 1.33).
SAFE_SYSCTLS = frozenset(
    [
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
    ]
)

# SELinux types a pod may set.
SELINUX_TYPES = frozenset(["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"])

# Volume types the restricted profile allows.
VOLUME_TYPES = frozenset(
    ["configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"]
)

# The AppArmor annotation prefix (deprecated, still checked).
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def _q(text: str) -> str:
    """`text` in double quotes, escaped, as the Rust checker prints it."""
    return json.dumps(text)


def _get(value: Any, *path: str) -> Any:
    """The value at `path` under `value`, or None when any step is missing or not a mapping."""
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _int(value: Any) -> int | None:
    # A YAML or JSON boolean is not a number here (Python's bool is an int).
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def check_restricted(pod: Any) -> list[Violation]:
    """Every violation of the restricted profile by `pod` (a Pod object as a dict); empty when it passes."""
    found: list[Violation] = []

    def violation(control: str, field: str, message: str) -> None:
        found.append(Violation(control, field, message))

    spec = _dict(_get(pod, "spec"))
    pod_security = _dict(spec.get("securityContext"))
    linux = _get(spec, "os", "name") != "windows"

    def truthy(value: Any) -> bool:
        return _bool(value) is True

    containers: list[tuple[str, dict]] = []
    for kind in ("containers", "initContainers", "ephemeralContainers"):
        for i, container in enumerate(_list(spec.get(kind))):
            containers.append((f"spec.{kind}[{i}]", _dict(container)))
    # The security contexts: the pod's, then each container's.
    contexts: list[tuple[str, dict]] = [("spec.securityContext", pod_security)]
    for path, container in containers:
        contexts.append((f"{path}.securityContext", _dict(container.get("securityContext"))))

    # Baseline: HostProcess.
    for path, context in contexts:
        if truthy(_get(context, "windowsOptions", "hostProcess")):
            violation("HostProcess", f"{path}.windowsOptions.hostProcess", "must not be true")
    # Baseline: Host Namespaces.
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if truthy(spec.get(field)):
            violation("Host Namespaces", f"spec.{field}", "must not be true")
    for path, container in containers:
        context = _dict(container.get("securityContext"))
        # Baseline: Privileged Containers.
        if truthy(context.get("privileged")):
            violation("Privileged Containers", f"{path}.securityContext.privileged", "must not be true")
        # Baseline: Host Ports.
        for i, port in enumerate(_list(container.get("ports"))):
            host_port = _int(_get(port, "hostPort"))
            if host_port is not None and host_port != 0:
                violation("Host Ports", f"{path}.ports[{i}].hostPort", f"must be unset or 0 (is {host_port})")
        # Baseline: /proc Mount Type.
        mount = _str(context.get("procMount"))
        if mount is not None and mount != "Default":
            violation("/proc Mount Type", f"{path}.securityContext.procMount", f"must be Default (is {mount})")
        # Baseline (1.34): Host Probes / Lifecycle Hooks.
        handlers = [(probe, container.get(probe)) for probe in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [(f"lifecycle.{hook}", _get(container, "lifecycle", hook)) for hook in ("postStart", "preStop")]
        for name, handler in handlers:
            for kind in ("httpGet", "tcpSocket"):
                host = _str(_get(handler, kind, "host"))
                if host:
                    violation(
                        "Host Probes / Lifecycle Hooks", f"{path}.{name}.{kind}.host", f"must be unset (is {_q(host)})"
                    )
        if linux:
            # Restricted: Privilege Escalation.
            if _bool(context.get("allowPrivilegeEscalation")) is not False:
                violation("Privilege Escalation", f"{path}.securityContext.allowPrivilegeEscalation", "must be false")
            # Baseline and restricted: Capabilities.
            added = [c for c in _list(_get(context, "capabilities", "add")) if isinstance(c, str)]
            for capability in added:
                if capability not in BASELINE_CAPABILITIES:
                    violation(
                        "Capabilities (baseline)",
                        f"{path}.securityContext.capabilities.add",
                        f"{capability} is beyond the default set",
                    )
                if capability != "NET_BIND_SERVICE":
                    violation(
                        "Capabilities",
                        f"{path}.securityContext.capabilities.add",
                        f"adds {capability}; only NET_BIND_SERVICE may be added",
                    )
            drop = _get(context, "capabilities", "drop")
            if not (isinstance(drop, list) and "ALL" in drop):
                violation("Capabilities", f"{path}.securityContext.capabilities.drop", "must include ALL")
    # Baseline: SELinux, AppArmor and Seccomp (never Unconfined), on the pod and every container.
    for path, context in contexts:
        options = context.get("seLinuxOptions")
        if options is not None:
            kind = _str(_get(options, "type")) or ""
            if kind not in SELINUX_TYPES:
                violation("SELinux", f"{path}.seLinuxOptions.type", f"{_q(kind)} is not an allowed type")
            for field in ("user", "role"):
                if _str(_get(options, field)):
                    violation("SELinux", f"{path}.seLinuxOptions.{field}", "must not be set")
        kind = _str(_get(context, "appArmorProfile", "type"))
        if kind is not None and kind not in ("RuntimeDefault", "Localhost"):
            violation("AppArmor", f"{path}.appArmorProfile.type", f"must be RuntimeDefault or Localhost (is {kind})")
        kind = _str(_get(context, "seccompProfile", "type"))
        if linux and kind is not None and kind not in ("RuntimeDefault", "Localhost"):
            violation("Seccomp", f"{path}.seccompProfile.type", f"must be RuntimeDefault or Localhost (is {kind})")
    for key, value in _dict(_get(pod, "metadata", "annotations")).items():
        if isinstance(key, str) and key.startswith(APPARMOR_ANNOTATION):
            value = _str(value) or ""
            if not (value == "" or value == "runtime/default" or value.startswith("localhost/")):
                violation(
                    "AppArmor",
                    f"metadata.annotations[{_q(key)}]",
                    f"{_q(value)} is not runtime/default or localhost/*",
                )
    # Baseline: Sysctls.
    for i, sysctl in enumerate(_list(pod_security.get("sysctls"))):
        name = _str(_get(sysctl, "name")) or ""
        if name not in SAFE_SYSCTLS:
            violation("Sysctls", f"spec.securityContext.sysctls[{i}].name", f"{name} is not a safe sysctl")
    # Baseline: HostPath Volumes; restricted: Volume Types.
    for i, volume in enumerate(_list(spec.get("volumes"))):
        for kind, value in _dict(volume).items():
            if kind == "name" or value is None:
                continue
            if kind == "hostPath":
                violation("HostPath Volumes", f"spec.volumes[{i}].hostPath", "must not be used")
            if kind not in VOLUME_TYPES:
                violation("Volume Types", f"spec.volumes[{i}].{kind}", f"{kind} volumes are not allowed")
    # Restricted: Running as Non-root (the pod's true covers containers that leave it unset).
    pod_non_root = truthy(pod_security.get("runAsNonRoot"))
    if _bool(pod_security.get("runAsNonRoot")) is False:
        violation("Running as Non-root", "spec.securityContext.runAsNonRoot", "must be true")
    for path, context in contexts[1:]:
        value = _bool(context.get("runAsNonRoot"))
        if value is False:
            violation("Running as Non-root", f"{path}.runAsNonRoot", "must be true")
        elif value is None and not pod_non_root:
            violation("Running as Non-root", f"{path}.runAsNonRoot", "must be true here or in spec.securityContext")
    # Restricted: Running as Non-root user.
    for path, context in contexts:
        if _int(context.get("runAsUser")) == 0:
            violation("Running as Non-root user", f"{path}.runAsUser", "must not be 0")
    # Restricted: Seccomp must be set, on the pod or on every container.
    if linux and _get(pod_security, "seccompProfile", "type") is None:
        for path, context in contexts[1:]:
            if _get(context, "seccompProfile", "type") is None:
                violation(
                    "Seccomp",
                    f"{path}.seccompProfile.type",
                    "must be RuntimeDefault or Localhost here or in spec.securityContext",
                )
    return found
