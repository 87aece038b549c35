"""The trust boundaries the chart must draw (docs/concepts/trust-model.md), checked on its rendered objects:

- the run store authenticates: the trial Redis reads a password from its configuration, and every URL
  Secret carries it;
- only the release's pods and the served namespaces' sandbox pods may reach the trial Redis (no peer of
  any namespace);
- the sandbox pods' egress to the internet excepts private, link-local (metadata), CGNAT and loopback
  ranges, and their DNS goes to named peers only;
- the run-token signing key is mounted by the API's pods alone;
- the API reads the users' files (the sandbox pods' data volume) and cannot write them: every mount of
  that volume reaching its `users` folder is read-only;
- where the API runs, an admission policy limits the Secrets it may create;
- the shell and the tools model-written code runs with are the sandbox container's alone: the release's
  pods run the sandbox settings' `image` (the control-plane image, with no shell), never its
  `sandboxImage`, and the two differ.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Iterable

import yaml

from chart_check import Finding, Obj, _dict, _get, _list, pod_templates

#: The ranges a sandbox pod must not reach through an internet-wide egress rule.
EXCEPTED = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8")

RULE = "trust"


def _component(obj: Obj) -> str:
    labels = _dict(_get(obj.doc, "metadata", "labels"))
    return str(labels.get("app.kubernetes.io/component") or "")


def _string_data(obj: Obj) -> dict:
    return _dict(obj.doc.get("stringData"))


def check_store_auth(objects: list[Obj]) -> list[Finding]:
    """The trial Redis requires a password, and the URLs the roles are given carry it."""
    findings = []
    redis = [o for o in objects if o.kind == "Deployment" and _component(o) == "redis"]
    for deployment in redis:
        for container in _list(_get(deployment.doc, "spec", "template", "spec", "containers")):
            args = [str(a) for a in _list(container.get("args"))]
            if "--protected-mode" in args and "no" in args:
                findings.append(Finding(RULE, deployment.where, "Redis runs with --protected-mode no"))
            if not any(a.endswith(".conf") for a in args):
                findings.append(Finding(RULE, deployment.where, "Redis reads no configuration file with its password"))
        configs = [o for o in objects if o.kind == "Secret" and o.name.endswith("-redis-config")]
        if not any(re.search(r"^requirepass \S{16,}$", str(_string_data(c).get("redis.conf", "")), re.M) for c in configs):
            findings.append(Finding(RULE, deployment.where, "no Redis configuration Secret sets requirepass (16+ characters)"))
    if redis:
        for secret in (o for o in objects if o.kind == "Secret" and o.name.endswith("-redis")):
            if not re.match(r"^redis://:[^@]{16,}@", str(_string_data(secret).get("url", ""))):
                findings.append(Finding(RULE, secret.where, "the Redis URL carries no password"))
    return findings


def check_store_reach(objects: list[Obj]) -> list[Finding]:
    """No NetworkPolicy lets pods of any namespace reach the trial Redis."""
    findings = []
    for policy in (o for o in objects if o.kind == "NetworkPolicy"):
        selector = _dict(_get(policy.doc, "spec", "podSelector", "matchLabels"))
        if selector.get("app.kubernetes.io/component") != "redis":
            continue
        for rule in _list(_get(policy.doc, "spec", "ingress")):
            if not _list(rule.get("from")):
                findings.append(Finding(RULE, policy.where, "an ingress rule admits every source to Redis"))
            for peer in _list(rule.get("from")):
                namespaces = peer.get("namespaceSelector")
                if namespaces is not None and not _dict(namespaces).get("matchLabels", {}).get("kubernetes.io/metadata.name"):
                    findings.append(Finding(RULE, policy.where, f"a Redis ingress peer selects any namespace: {peer}"))
    return findings


def check_sandbox_egress(objects: list[Obj]) -> list[Finding]:
    """Internet-wide egress from the sandbox pods excepts the cluster's and the host's own ranges; DNS goes
    to named peers."""
    findings = []
    for policy in (o for o in objects if o.kind == "NetworkPolicy"):
        if _dict(_get(policy.doc, "spec", "podSelector", "matchLabels")).get("app.kubernetes.io/name") != "yuxi-sandbox":
            continue
        for rule in _list(_get(policy.doc, "spec", "egress")):
            peers = _list(rule.get("to"))
            ports = {p.get("port") for p in _list(rule.get("ports"))}
            if not peers and 53 in ports:
                findings.append(Finding(RULE, policy.where, "DNS egress to any address (name the cluster DNS in `to`)"))
            elif not peers:
                findings.append(Finding(RULE, policy.where, f"egress to any address on ports {sorted(ports, key=str)}"))
            for peer in peers:
                block = _dict(peer.get("ipBlock"))
                if not block:
                    continue
                network = ipaddress.ip_network(str(block.get("cidr")), strict=False)
                excepted = [ipaddress.ip_network(str(e), strict=False) for e in _list(block.get("except"))]
                for needed in EXCEPTED:
                    needed_net = ipaddress.ip_network(needed)
                    inside = needed_net.version == network.version and needed_net.subnet_of(network)
                    covered = any(needed_net.version == e.version and needed_net.subnet_of(e) for e in excepted)
                    if inside and not covered:
                        findings.append(Finding(RULE, policy.where, f"egress to {network} does not except {needed}"))
    return findings


def check_signing_key(objects: list[Obj]) -> list[Finding]:
    """Only the API's pods mount the run-token key; where the API runs, a policy limits its Secrets."""
    findings = []
    keys = {o.name for o in objects if o.kind == "Secret" and o.name.endswith("-run-token-key")}
    for obj, _, pod in pod_templates(objects):
        mounted = {
            _dict(v.get("secret")).get("secretName") for v in _list(_get(pod, "spec", "volumes"))
        } & keys
        component = _dict(_get(pod, "metadata", "labels")).get("app.kubernetes.io/component")
        if mounted and component != "api":
            findings.append(Finding(RULE, obj.where, f"the {component} mounts the run-token key {sorted(mounted)}"))
    api = [o for o in objects if o.kind == "Deployment" and _component(o) == "api"]
    if api and not keys:
        findings.append(Finding(RULE, api[0].where, "the API runs without a run-token key Secret"))
    if api and not any(o.kind == "ValidatingAdmissionPolicy" for o in objects):
        findings.append(Finding(RULE, api[0].where, "no ValidatingAdmissionPolicy limits the Secrets the API creates"))
    return findings


def check_user_data(objects: list[Obj]) -> list[Finding]:
    """The API mounts the users' files (the sandbox settings' `userDataClaim`) read-only wherever a mount
    reaches their `users` folder (the whole volume, `users`, or below it)."""
    findings = []
    claims = set()
    for config in (o for o in objects if o.kind == "ConfigMap" and o.name.endswith("-sandbox-settings")):
        match = re.search(r'^userDataClaim:\s*"?([^"\s]+)"?\s*$', str(_dict(config.doc.get("data")).get("settings.yaml", "")), re.M)
        if match:
            claims.add(match.group(1))
    for deployment in (o for o in objects if o.kind == "Deployment" and _component(o) == "api"):
        spec = _dict(_get(deployment.doc, "spec", "template", "spec"))
        volumes = {
            v.get("name")
            for v in _list(spec.get("volumes"))
            if _dict(v.get("persistentVolumeClaim")).get("claimName") in claims
        }
        for container in _list(spec.get("containers")) + _list(spec.get("initContainers")):
            for mount in _list(container.get("volumeMounts")):
                sub_path = str(mount.get("subPath") or "").strip("/")
                reaches = sub_path in ("", "users") or sub_path.startswith("users/")
                if mount.get("name") in volumes and reaches and not mount.get("readOnly"):
                    findings.append(
                        Finding(RULE, deployment.where, f"the API mounts the users' files writable ({mount.get('name')} at {mount.get('mountPath')})")
                    )
    return findings


def check_images(objects: list[Obj]) -> list[Finding]:
    """The controller's, webhook's and API's containers run the sandbox settings' `image`; the settings'
    `sandboxImage`, the one with a shell and tools for `execute`, is another image and none of theirs."""
    findings = []
    for config in (o for o in objects if o.kind == "ConfigMap" and o.name.endswith("-sandbox-settings")):
        settings = _dict(yaml.safe_load(str(_dict(config.doc.get("data")).get("settings.yaml", ""))))
        image, sandbox = settings.get("image"), settings.get("sandboxImage")
        if not sandbox or sandbox == image:
            findings.append(Finding(RULE, config.where, f"the sandbox container runs the control-plane image {image}"))
            continue
        for obj, _, pod in pod_templates(objects):
            component = _dict(_get(pod, "metadata", "labels")).get("app.kubernetes.io/component")
            if component not in ("controller", "webhook", "api"):
                continue
            for container in _list(_get(pod, "spec", "containers")) + _list(_get(pod, "spec", "initContainers")):
                if container.get("image") != image:
                    findings.append(
                        Finding(RULE, obj.where, f"the {component}'s container {container.get('name')} runs "
                                f"{container.get('image')}, not the control-plane image {image}")
                    )
    return findings


def check_trust(objects: Iterable[Obj]) -> list[Finding]:
    """Every check of this module."""
    objects = list(objects)
    return (
        check_store_auth(objects)
        + check_store_reach(objects)
        + check_sandbox_egress(objects)
        + check_signing_key(objects)
        + check_user_data(objects)
        + check_images(objects)
    )
