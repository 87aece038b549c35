"""The checks `make chart-check` runs on the Helm chart (scripts/chart-check is the command).

For the chart (charts/yuxi-operator by default) it:
  - lints it with Helm's linter in strict mode (warnings fail) for Kubernetes 1.33;
  - renders it offline, with Helm's own code (helm-python-sdk), for the default values and for every
    ci/*-values.yaml file, as release `yuxi` in namespace `yuxi-system`;
  - validates every rendered object strictly (unknown fields fail) against the Kubernetes 1.33 schemas with
    kubernetes-validate; objects of kinds outside Kubernetes' own API groups (cert-manager, prometheus-
    operator) only need an apiVersion, a kind and a name, and are listed as skipped;
  - checks the admission webhooks: both configurations cover Agents and AgentRuns, fail closed, have no side
    effects, speak admission/v1, time out, call a rendered Service of the release's namespace on a port it
    exposes at /validate or /mutate, and carry a CA (a caBundle, or cert-manager's CA injection from a
    rendered Certificate);
  - checks RBAC: no `*` in a rule, and every rule in the templates has a comment line right above it;
  - checks every pod template against the Pod Security `restricted` profile (pss.py) and that the pods that
    need no API token (all but the controller, the webhook and the api) do not mount one, deliberately;
  - checks that the chart's crds/ are byte for byte the repository's crds/;
  - checks that values.schema.json refuses bad values, naming the bad key.

Every function here is importable; `main` is the command line. A failure names the values file, the template
file, the object and the rule.
"""

from __future__ import annotations

import argparse
import json
import base64
import binascii
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pss  # noqa: E402  (beside this file)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_CHART = ROOT / "charts" / "yuxi-operator"
DEFAULT_CRDS = ROOT / "crds"
RELEASE = "yuxi"
NAMESPACE = "yuxi-system"
KUBE_VERSION = "1.33.0"
# The pods whose programs talk to the Kubernetes API, by their `app.kubernetes.io/component` label (or, when
# a pod has none, a `-`-separated word of its workload's name). Every other pod must not mount a token.
TOKEN_COMPONENTS = ("controller", "webhook", "api")
GROUP = "yuxi.dev"
WEBHOOK_RESOURCES = ("agents", "agentruns")
WEBHOOK_PATHS = {"ValidatingWebhookConfiguration": "/validate", "MutatingWebhookConfiguration": "/mutate"}
INJECT_CA = "cert-manager.io/inject-ca-from"
RBAC_KINDS = ("Role", "ClusterRole")
RULE_FIELDS = ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs")
# Values the schema must refuse: what, the values, a word the refusal must name.
BAD_VALUES: tuple[tuple[str, dict, str], ...] = (
    ('controller.replicas: "two"', {"controller": {"replicas": "two"}}, "replicas"),
    ("an unknown top-level key notAValue", {"notAValue": True}, "notAValue"),
    ("webhook.failurePolicy: Sometimes", {"webhook": {"failurePolicy": "Sometimes"}}, "failurePolicy"),
)


# ---------------------------------------------------------------------------------------------------------
# Findings and objects.


@dataclass(frozen=True)
class Finding:
    """One broken rule: which rule, where (values file, template file, object), and what is wrong."""

    rule: str
    where: str
    message: str

    def __str__(self) -> str:
        return f"{self.where}: [{self.rule}] {self.message}"


@dataclass
class Obj:
    """A rendered object and where it came from."""

    doc: dict
    # The template file, relative to the chart (`templates/webhook.yaml`).
    source: str = "(crafted)"
    # The values it was rendered with (`default values`, `ci/production-values.yaml`).
    values: str = "(crafted)"

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind") or "")

    @property
    def api_version(self) -> str:
        return str(self.doc.get("apiVersion") or "")

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def name(self) -> str:
        return str(_get(self.doc, "metadata", "name") or "")

    def namespace(self, default: str) -> str:
        return str(_get(self.doc, "metadata", "namespace") or default)

    @property
    def ref(self) -> str:
        return f"{self.kind or '?'}/{self.name or '?'}"

    @property
    def where(self) -> str:
        return f"{self.values}: {self.source}: {self.ref}"


@dataclass
class Report:
    """What the checks found, and what they have to say besides."""

    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _get(value: Any, *path: Any) -> Any:
    for key in path:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and isinstance(key, int) and -len(value) <= key < len(value):
            value = value[key]
        else:
            return None
    return value


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


# ---------------------------------------------------------------------------------------------------------
# Linting and rendering.


def values_sets(chart_dir: Path) -> list[tuple[str, dict]]:
    """The default values, then each ci/*-values.yaml file, as (label, values)."""
    import helm_python as helm

    sets: list[tuple[str, dict]] = [("default values", {})]
    for path in sorted((chart_dir / "ci").glob("*-values.yaml")):
        sets.append((f"ci/{path.name}", helm.values_from_yaml(path.read_text()) or {}))
    return sets


def lint(chart_dir: Path, label: str, values: dict, kube_version: str = KUBE_VERSION, namespace: str = NAMESPACE):
    """Helm's linter in strict mode (warnings are errors); info messages pass."""
    import helm_python as helm

    report = helm.lint(str(chart_dir), values, strict=True, namespace=namespace, kube_version=f"v{kube_version}")
    findings = []
    for message in report.get("messages") or []:
        severity = message.get("severity", 0)
        if severity >= 2:
            kind = "error" if severity >= 3 else "warning"
            text = str(message.get("error", "")).strip()
            findings.append(Finding("helm lint --strict", f"{label}: {message.get('path', '?')}", f"{kind}: {text}"))
    reported = {f.message.split(": ", 1)[1] for f in findings}
    for error in report.get("errors") or []:
        if str(error).strip() not in reported:
            findings.append(Finding("helm lint --strict", label, str(error).strip()))
    return findings


def _yaml_loader() -> type:
    class Loader(yaml.SafeLoader):
        pass

    # A plain `=` is a string to Kubernetes, not PyYAML's "value" tag.
    Loader.add_constructor("tag:yaml.org,2002:value", lambda loader, node: str(node.value))
    return Loader


def parse_rendered(manifests: dict[str, str], label: str, chart_name: str) -> tuple[list[Obj], list[Finding]]:
    """The objects of Helm's rendered templates ({template path: text}). As with `helm install`, only the
    .yaml, .yml and .json files are manifests (NOTES.txt is not)."""
    objects: list[Obj] = []
    findings: list[Finding] = []
    loader = _yaml_loader()
    for path in sorted(manifests):
        source = path[len(chart_name) + 1 :] if path.startswith(chart_name + "/") else path
        if not source.endswith((".yaml", ".yml", ".json")):
            continue
        try:
            docs = list(yaml.load_all(manifests[path], Loader=loader))
        except yaml.YAMLError as error:
            findings.append(Finding("rendered YAML", f"{label}: {source}", f"does not parse: {error}"))
            continue
        for doc in docs:
            if doc is None:
                continue
            if not isinstance(doc, dict):
                findings.append(Finding("rendered YAML", f"{label}: {source}", "a document that is not a mapping"))
                continue
            objects.append(Obj(doc, source, label))
    return objects, findings


def render(chart: Any, label: str, values: dict, release: str = RELEASE, namespace: str = NAMESPACE):
    """Renders `chart` (a helm_python Chart) as an install; (objects, findings)."""
    import helm_python as helm

    try:
        manifests = chart.render(values, name=release, namespace=namespace, is_install=True)
    except helm.HelmError as error:
        return [], [Finding("render", label, f"{type(error).__name__}: {str(error).strip()}")]
    return parse_rendered(manifests, label, chart.name)


def check_duplicates(objects: Iterable[Obj], namespace: str = NAMESPACE) -> list[Finding]:
    """Two objects with the same kind, namespace and name cannot both be installed."""
    seen: dict[tuple, Obj] = {}
    findings = []
    for obj in objects:
        key = (obj.group, obj.kind, obj.namespace(namespace), obj.name)
        if key in seen:
            findings.append(Finding("unique objects", obj.where, f"also rendered by {seen[key].source}"))
        else:
            seen[key] = obj
    return findings


# ---------------------------------------------------------------------------------------------------------
# The Kubernetes schemas.


def is_kubernetes_group(group: str) -> bool:
    """Whether an API group is Kubernetes' own (core, apps, batch, policy, *.k8s.io), whose kinds the
    schemas must know."""
    return group == "" or "." not in group or group.endswith(".k8s.io")


def validate_schemas(objects: Iterable[Obj], kube_version: str = KUBE_VERSION) -> tuple[list[Finding], list[Obj]]:
    """Every object strictly against the Kubernetes schemas; (findings, objects of other kinds, which are
    checked only for apiVersion, kind and metadata.name)."""
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError

    findings: list[Finding] = []
    skipped: list[Obj] = []
    for obj in objects:
        missing = [
            name
            for name, value in (("apiVersion", obj.api_version), ("kind", obj.kind), ("metadata.name", obj.name))
            if not value
        ]
        if missing:
            findings.append(Finding("Kubernetes schema", obj.where, f"no {', '.join(missing)}"))
            continue
        try:
            kubernetes_validate.validate(obj.doc, kube_version, strict=True)
        except SchemaNotFoundError:
            if is_kubernetes_group(obj.group):
                findings.append(
                    Finding(
                        "Kubernetes schema", obj.where, f"Kubernetes {kube_version} has no {obj.api_version} {obj.kind}"
                    )
                )
            else:
                skipped.append(obj)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.path) or "(the object)"
            findings.append(Finding("Kubernetes schema", obj.where, f"{path}: {error.message}"))
        except Exception as error:  # noqa: BLE001 (an unsupported version, a broken schema: a failure too)
            message = getattr(error, "message", None) or f"{type(error).__name__}: {error}"
            findings.append(Finding("Kubernetes schema", obj.where, f"could not be validated: {message}"))
    return findings, skipped


# ---------------------------------------------------------------------------------------------------------
# The admission webhooks.


def _service_port(service: Obj, port: int) -> dict | None:
    for entry in _list(_get(service.doc, "spec", "ports")):
        if _get(entry, "port") == port:
            return entry
    return None


def pod_templates(objects: Iterable[Obj]) -> list[tuple[Obj, str, dict]]:
    """Every pod template: (the object, the path of its pod, the pod as {metadata, spec})."""
    found = []
    for obj in objects:
        if obj.kind in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
            path, template = "spec.template", _get(obj.doc, "spec", "template")
        elif obj.kind == "CronJob":
            path, template = "spec.jobTemplate.spec.template", _get(obj.doc, "spec", "jobTemplate", "spec", "template")
        elif obj.kind == "Pod" and obj.api_version == "v1":
            path, template = "", obj.doc
        else:
            continue
        template = _dict(template)
        found.append((obj, path, {"metadata": _dict(template.get("metadata")), "spec": _dict(template.get("spec"))}))
    return found


def _selects(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _container_ports(pod: dict) -> tuple[set, set]:
    numbers, names = set(), set()
    for container in _list(_get(pod, "spec", "containers")):
        for port in _list(_get(container, "ports")):
            numbers.add(_get(port, "containerPort"))
            if _get(port, "name"):
                names.add(_get(port, "name"))
    return numbers, names


def check_service_backend(service: Obj, port: dict, objects: list[Obj], where: str, namespace: str = NAMESPACE):
    """The Service selects a rendered pod template whose containers have the port's target port."""
    rule = "webhook service"
    selector = _dict(_get(service.doc, "spec", "selector"))
    pods = [
        (obj, pod) for obj, _, pod in pod_templates(objects) if obj.namespace(namespace) == service.namespace(namespace)
    ]
    selected = [(obj, pod) for obj, pod in pods if _selects(selector, _dict(_get(pod, "metadata", "labels")))]
    if not selected:
        return [Finding(rule, where, f"Service {service.name} selects no rendered pod (selector {selector or 'none'})")]
    target = port.get("targetPort", port.get("port"))
    findings = []
    for obj, pod in selected:
        numbers, names = _container_ports(pod)
        if target not in (numbers | names):
            findings.append(
                Finding(
                    rule, where, f"Service {service.name} targets port {target!r}, which {obj.ref} does not declare"
                )
            )
    return findings


def _webhook_covers(webhook: dict, resource: str) -> bool:
    for rule in _list(webhook.get("rules")):
        if GROUP in _list(_get(rule, "apiGroups")) and resource in _list(_get(rule, "resources")):
            return True
    return False


def _rule_operations(webhook: dict, resource: str) -> set:
    operations: set = set()
    for rule in _list(webhook.get("rules")):
        if GROUP in _list(_get(rule, "apiGroups")) and resource in _list(_get(rule, "resources")):
            operations |= set(_list(_get(rule, "operations")))
    return operations


def _pem_certificate(ca_bundle: Any) -> bool:
    if not isinstance(ca_bundle, str) or not ca_bundle.strip():
        return False
    try:
        decoded = base64.b64decode(ca_bundle, validate=True)
    except (binascii.Error, ValueError):
        return False
    return b"-----BEGIN CERTIFICATE-----" in decoded


def check_webhook_ca(config: Obj, webhook: dict, service: Obj | None, objects: list[Obj], namespace: str, where: str):
    """A non-empty caBundle holding a PEM certificate, or cert-manager's CA injection from a rendered
    Certificate that names the Service's DNS name."""
    rule = "webhook CA"
    inject = _get(config.doc, "metadata", "annotations", INJECT_CA)
    ca_bundle = _get(webhook, "clientConfig", "caBundle")
    if inject is None:
        if ca_bundle in (None, ""):
            return [
                Finding(
                    rule,
                    where,
                    f"no clientConfig.caBundle and no {INJECT_CA} annotation: the API server cannot trust the webhook",
                )
            ]
        if not _pem_certificate(ca_bundle):
            return [Finding(rule, where, "clientConfig.caBundle is not a base64 PEM certificate")]
        return []
    ns, _, name = str(inject).partition("/")
    if not ns or not name:
        return [Finding(rule, config.where, f"{INJECT_CA}: {inject!r} is not <namespace>/<certificate>")]
    certificates = [
        obj
        for obj in objects
        if obj.kind == "Certificate"
        and obj.group == "cert-manager.io"
        and obj.name == name
        and obj.namespace(namespace) == ns
    ]
    if not certificates:
        return [Finding(rule, config.where, f"{INJECT_CA}: {inject} names no rendered cert-manager Certificate")]
    findings = []
    if service is not None:
        dns = f"{service.name}.{service.namespace(namespace)}.svc"
        names = _list(_get(certificates[0].doc, "spec", "dnsNames"))
        if dns not in names:
            findings.append(
                Finding(rule, certificates[0].where, f"dnsNames {names} lack {dns}, the name the API server calls")
            )
    return findings


def check_webhooks(objects: list[Obj], namespace: str = NAMESPACE) -> list[Finding]:
    """The validating and mutating webhook configurations (assertion a)."""
    findings: list[Finding] = []
    services = {(o.namespace(namespace), o.name): o for o in objects if o.kind == "Service" and o.api_version == "v1"}
    for kind, expected_path in WEBHOOK_PATHS.items():
        configs = [o for o in objects if o.kind == kind]
        if not configs:
            findings.append(Finding("webhooks", f"{objects[0].values if objects else '?'}", f"no {kind} is rendered"))
            continue
        covered: set[str] = set()
        for config in configs:
            webhooks = _list(config.doc.get("webhooks"))
            if not webhooks:
                findings.append(Finding("webhooks", config.where, "has no webhooks"))
            for i, webhook in enumerate(webhooks):
                webhook = _dict(webhook)
                where = f"{config.where}: webhooks[{i}] {webhook.get('name', '?')}"
                resources = [r for r in WEBHOOK_RESOURCES if _webhook_covers(webhook, r)]
                covered.update(resources)
                needed = {"CREATE", "UPDATE"} if kind.startswith("Validating") else {"CREATE"}
                for resource in resources:
                    operations = _rule_operations(webhook, resource)
                    if "*" not in operations and not needed <= operations:
                        findings.append(
                            Finding(
                                "webhooks",
                                where,
                                f"rules for {resource} cover {sorted(operations)}, not {sorted(needed)}",
                            )
                        )
                if webhook.get("failurePolicy") != "Fail":
                    findings.append(
                        Finding("webhooks", where, f"failurePolicy is {webhook.get('failurePolicy')!r}, not Fail")
                    )
                if webhook.get("sideEffects") != "None":
                    findings.append(
                        Finding("webhooks", where, f"sideEffects is {webhook.get('sideEffects')!r}, not None")
                    )
                if "v1" not in _list(webhook.get("admissionReviewVersions")):
                    findings.append(Finding("webhooks", where, "admissionReviewVersions lacks v1"))
                timeout = webhook.get("timeoutSeconds")
                if not (isinstance(timeout, int) and not isinstance(timeout, bool) and 1 <= timeout <= 30):
                    findings.append(Finding("webhooks", where, f"timeoutSeconds must be set, 1 to 30 (is {timeout!r})"))
                client = _dict(webhook.get("clientConfig"))
                ref = _dict(client.get("service"))
                service = None
                if client.get("url") is not None or not ref:
                    findings.append(Finding("webhook service", where, "clientConfig must name a service, not a url"))
                else:
                    svc_ns, svc_name = ref.get("namespace"), ref.get("name")
                    port = ref.get("port", 443)
                    if svc_ns != namespace:
                        findings.append(
                            Finding(
                                "webhook service",
                                where,
                                f"service namespace is {svc_ns!r}, not the release's {namespace}",
                            )
                        )
                    service = services.get((svc_ns, svc_name))
                    if service is None:
                        findings.append(
                            Finding("webhook service", where, f"Service {svc_ns}/{svc_name} is not rendered")
                        )
                    else:
                        exposed = _service_port(service, port)
                        if exposed is None:
                            ports = [p.get("port") for p in _list(_get(service.doc, "spec", "ports"))]
                            findings.append(
                                Finding(
                                    "webhook service", where, f"Service {svc_name} exposes {ports}, not port {port}"
                                )
                            )
                        else:
                            findings += check_service_backend(service, exposed, objects, where, namespace)
                    if ref.get("path") != expected_path:
                        findings.append(
                            Finding("webhook service", where, f"path is {ref.get('path')!r}, not {expected_path}")
                        )
                findings += check_webhook_ca(config, webhook, service, objects, namespace, where)
        for resource in WEBHOOK_RESOURCES:
            if resource not in covered:
                findings.append(
                    Finding("webhooks", f"{configs[0].values}: {kind}", f"no webhook has a rule for {GROUP} {resource}")
                )
    return findings


# ---------------------------------------------------------------------------------------------------------
# RBAC.


def check_rbac_rules(objects: Iterable[Obj]) -> list[Finding]:
    """No `*` anywhere in a Role's or ClusterRole's rules (assertion b)."""
    findings = []
    for obj in objects:
        if obj.kind not in RBAC_KINDS or obj.group != "rbac.authorization.k8s.io":
            continue
        for i, rule in enumerate(_list(obj.doc.get("rules"))):
            for name in RULE_FIELDS:
                wild = [v for v in _list(_get(rule, name)) if isinstance(v, str) and "*" in v]
                if wild:
                    findings.append(
                        Finding("RBAC wildcard", f"{obj.where}: rules[{i}].{name}", f"uses {wild}: name each one")
                    )
    return findings


RULE_START = re.compile(r"^\s*-\s+\{?\s*(" + "|".join(RULE_FIELDS) + r")\s*:")


def uncommented_rules(text: str) -> list[tuple[int, str]]:
    """The rules in a template's source without a comment line right above: (line number, line).

    A rule starts with a list item whose first key is a PolicyRule field (`- apiGroups:` usually); the
    previous non-blank line must be a YAML comment with some text (`# why`)."""
    found = []
    previous = ""
    for number, line in enumerate(text.splitlines(), start=1):
        if RULE_START.match(line):
            comment = previous.strip()
            if not (comment.startswith("#") and comment.lstrip("#").strip()):
                found.append((number, line.strip()))
        if line.strip():
            previous = line
    return found


def rbac_template_files(chart_dir: Path, objects: Iterable[Obj]) -> list[str]:
    """The template files that render Roles or ClusterRoles, and helper files (.tpl) that hold rules."""
    files = {obj.source for obj in objects if obj.kind in RBAC_KINDS}
    templates = chart_dir / "templates"
    for path in templates.rglob("*"):
        if path.is_file() and path.suffix == ".tpl":
            text = path.read_text(errors="replace")
            if re.search(r"^\s*-?\s*verbs\s*:", text, re.M):
                files.add(str(path.relative_to(chart_dir)))
    return sorted(files)


def check_rbac_comments(chart_dir: Path, files: Iterable[str]) -> list[Finding]:
    """Every rule is commented with why (assertion b, in the template source)."""
    findings = []
    for name in files:
        path = chart_dir / name
        if not path.is_file():
            continue
        for number, line in uncommented_rules(path.read_text(errors="replace")):
            findings.append(
                Finding("RBAC rule comment", f"{name}:{number}", f"`{line}` needs a `# why` comment on the line above")
            )
    return findings


# ---------------------------------------------------------------------------------------------------------
# Pods.


def check_pod_security(objects: Iterable[Obj]) -> list[Finding]:
    """Every pod template passes the restricted Pod Security Standard (assertion c)."""
    findings = []
    for obj, path, pod in pod_templates(objects):
        for violation in pss.check_restricted(pod):
            field = f"{path}.{violation.field}" if path else violation.field
            findings.append(
                Finding(f"Pod Security restricted: {violation.control}", f"{obj.where}: {field}", violation.message)
            )
    return findings


def component_of(obj: Obj, pod: dict, components: Iterable[str]) -> str | None:
    """The component of a pod: its `app.kubernetes.io/component` label (the pod's, else the workload's);
    without one, a component that is a `-`-separated word of the workload's name."""
    label = _get(pod, "metadata", "labels", "app.kubernetes.io/component") or _get(
        obj.doc, "metadata", "labels", "app.kubernetes.io/component"
    )
    if label:
        return str(label)
    words = obj.name.split("-")
    return next((c for c in components if c in words), None)


def token_mount(pod: dict, service_accounts: dict[str, Obj]) -> tuple[bool, str]:
    """Whether a pod gets an API token, and what decides it."""
    spec = _dict(pod.get("spec"))
    projected = any(
        _get(source, "serviceAccountToken") is not None
        for volume in _list(spec.get("volumes"))
        for source in _list(_get(volume, "projected", "sources"))
    )
    if projected:
        return True, "a projected serviceAccountToken volume"
    explicit = spec.get("automountServiceAccountToken")
    if isinstance(explicit, bool):
        return explicit, f"automountServiceAccountToken: {str(explicit).lower()} in the pod spec"
    account = spec.get("serviceAccountName") or "default"
    sa = service_accounts.get(account)
    if sa is not None and isinstance(sa.doc.get("automountServiceAccountToken"), bool):
        value = sa.doc["automountServiceAccountToken"]
        return value, f"automountServiceAccountToken: {str(value).lower()} on ServiceAccount {account}"
    return True, f"automountServiceAccountToken unset on the pod and on ServiceAccount {account}"


def check_tokens(
    objects: list[Obj], namespace: str = NAMESPACE, components: Iterable[str] = TOKEN_COMPONENTS
) -> tuple[list[Finding], list[str]]:
    """Pods that need no API token set that deliberately; those that need one get one. (findings, one line
    per pod saying whether it mounts a token and why)."""
    components = tuple(components)
    accounts = {o.name: o for o in objects if o.kind == "ServiceAccount" and o.namespace(namespace) == namespace}
    findings, lines = [], []
    for obj, _, pod in pod_templates(objects):
        component = component_of(obj, pod, components)
        needs = component in components
        mounts, why = token_mount(pod, accounts)
        lines.append(f"{obj.ref} ({component or 'no component'}): {'mounts a token' if mounts else 'no token'} ({why})")
        if needs and not mounts:
            findings.append(
                Finding("API token", obj.where, f"the {component} talks to the API but gets no token ({why})")
            )
        if not needs and mounts:
            findings.append(
                Finding(
                    "API token",
                    obj.where,
                    f"needs no API token but {why}: set automountServiceAccountToken: false in its pod spec",
                )
            )
    return findings, lines


# ---------------------------------------------------------------------------------------------------------
# CRDs and the values schema.


def check_crds(chart_dir: Path, crds_dir: Path, chart: Any = None) -> list[Finding]:
    """The chart's crds/ holds the files of the repository's crds/, same names, same bytes (assertion d),
    and Helm loads them all."""
    rule = "CRDs"
    chart_crds = chart_dir / "crds"
    if not chart_crds.is_dir():
        return [Finding(rule, "crds/", f"the chart has no crds/ folder (expected the files of {crds_dir})")]
    ours = {p.name: p for p in chart_crds.iterdir() if p.is_file()}
    theirs = {p.name: p for p in crds_dir.iterdir() if p.is_file()}
    findings = []
    for name in sorted(theirs.keys() - ours.keys()):
        findings.append(Finding(rule, f"crds/{name}", f"missing from the chart (it is in {crds_dir.name}/)"))
    for name in sorted(ours.keys() - theirs.keys()):
        findings.append(Finding(rule, f"crds/{name}", f"is not in the repository's {crds_dir.name}/"))
    for name in sorted(ours.keys() & theirs.keys()):
        if ours[name].read_bytes() != theirs[name].read_bytes():
            findings.append(
                Finding(
                    rule,
                    f"crds/{name}",
                    f"differs from {crds_dir.name}/{name} (copy it: cp {crds_dir.name}/*.yaml <chart>/crds/)",
                )
            )
    if chart is not None:
        loaded = {Path(c.get("name", "")).name for c in chart.crds}
        for name in sorted(k for k in ours if k.endswith((".yaml", ".yml", ".json")) and k not in loaded):
            findings.append(Finding(rule, f"crds/{name}", "Helm does not load it as a CRD"))
    return findings


def check_values_schema(
    chart: Any, bad_values: Iterable[tuple[str, dict, str]] = BAD_VALUES
) -> tuple[list[Finding], list[str]]:
    """values.schema.json accepts the defaults and refuses each bad value with a message naming its key
    (assertion e). (findings, one line per refusal)."""
    import helm_python as helm

    rule = "values schema"
    if chart.schema is None:
        return [Finding(rule, "values.schema.json", "the chart has no values schema")], []
    findings, lines = [], []
    try:
        chart.validate_schema(chart.merge_values({}))
    except helm.HelmError as error:
        return [Finding(rule, "values.yaml", f"the default values are refused: {str(error).strip()}")], []
    for what, values, key in bad_values:
        try:
            # Merged with the defaults, as an install does, so only the bad value can be at fault.
            chart.validate_schema(chart.merge_values(values))
        except helm.HelmError as error:
            message = " ".join(str(error).split())
            if key not in message:
                findings.append(
                    Finding(
                        rule, "values.schema.json", f"refuses {what}, but the message does not name {key}: {message}"
                    )
                )
            else:
                lines.append(f"refuses {what}: {message}")
        else:
            findings.append(Finding(rule, "values.schema.json", f"accepts {what}"))
    return findings, lines


# ---------------------------------------------------------------------------------------------------------
# Everything.


def check_dashboards(objects: Iterable[Obj]) -> list[Finding]:
    """Each Grafana dashboard ConfigMap (`*-dashboard`) holds JSON dashboards whose panels all have a
    title and at least one PromQL target (rows excepted)."""
    findings = []
    for obj in objects:
        if obj.kind != "ConfigMap" or not obj.name.endswith("-dashboard"):
            continue
        for key, text in _dict(obj.doc.get("data")).items():
            where = f"{obj.where}: {key}"
            try:
                dashboard = json.loads(text)
            except ValueError as error:
                findings.append(Finding("dashboards", where, f"is not JSON: {error}"))
                continue
            for panel in _list(dashboard.get("panels")):
                if panel.get("type") == "row":
                    continue
                if not panel.get("title") or not [t for t in _list(panel.get("targets")) if t.get("expr")]:
                    findings.append(Finding("dashboards", where, f"panel {panel.get('id')} has no title or no query"))
    return findings


def check_rendered(
    objects: list[Obj],
    namespace: str = NAMESPACE,
    kube_version: str = KUBE_VERSION,
    components: Iterable[str] = TOKEN_COMPONENTS,
) -> Report:
    """The checks of one rendering's objects (no chart files needed)."""
    report = Report()
    label = objects[0].values if objects else "?"
    report.findings += check_duplicates(objects, namespace)
    schema_findings, skipped = validate_schemas(objects, kube_version)
    report.findings += schema_findings
    skipped_text = ", ".join(f"{o.api_version} {o.ref}" for o in skipped) or "none"
    report.notes.append(
        f"{label}: {len(objects)} objects, {len(objects) - len(skipped)} validated against the Kubernetes"
        f" {kube_version} schemas; kinds they do not know, checked for apiVersion/kind/name only: {skipped_text}"
    )
    report.findings += check_webhooks(objects, namespace)
    report.findings += check_dashboards(objects)
    report.findings += check_rbac_rules(objects)
    report.findings += check_pod_security(objects)
    import trust  # the trust boundaries, beside this module

    report.findings += trust.check_trust(objects)
    token_findings, token_lines = check_tokens(objects, namespace, components)
    report.findings += token_findings
    report.notes += [f"{label}: tokens: {line}" for line in token_lines]
    return report


def check_chart(
    chart_dir: Path,
    crds_dir: Path = DEFAULT_CRDS,
    release: str = RELEASE,
    namespace: str = NAMESPACE,
    kube_version: str = KUBE_VERSION,
    components: Iterable[str] = TOKEN_COMPONENTS,
) -> Report:
    """All the checks of the chart in `chart_dir`."""
    import helm_python as helm

    report = Report()
    if not (chart_dir / "Chart.yaml").is_file():
        report.findings.append(Finding("chart", str(chart_dir), "no Helm chart here (no Chart.yaml)"))
        return report
    try:
        chart = helm.Chart.load(str(chart_dir))
    except helm.HelmError as error:
        report.findings.append(Finding("chart", str(chart_dir), f"does not load: {str(error).strip()}"))
        return report
    sets = values_sets(chart_dir)
    if len(sets) == 1:
        report.notes.append("no ci/*-values.yaml files: only the default values are rendered")
    all_objects: list[Obj] = []
    for label, values in sets:
        lint_findings = lint(chart_dir, label, values, kube_version, namespace)
        report.findings += lint_findings
        report.notes.append(
            f"{label}: helm lint --strict (Kubernetes {kube_version}): {'ok' if not lint_findings else 'FAILED'}"
        )
        objects, findings = render(chart, label, values, release, namespace)
        report.findings += findings
        if not objects:
            if not findings:
                report.findings.append(Finding("render", label, "renders no objects"))
            continue
        rendered = check_rendered(objects, namespace, kube_version, components)
        report.findings += rendered.findings
        report.notes += rendered.notes
        all_objects += objects
    rbac_files = rbac_template_files(chart_dir, all_objects)
    report.findings += check_rbac_comments(chart_dir, rbac_files)
    report.notes.append(
        f"RBAC rules' comments checked in: {', '.join(rbac_files) or 'no file (no Role or ClusterRole)'}"
    )
    report.findings += check_crds(chart_dir, crds_dir, chart)
    report.notes.append(
        f"CRDs compared with {crds_dir.relative_to(ROOT) if crds_dir.is_relative_to(ROOT) else crds_dir}/"
    )
    schema_findings, schema_lines = check_values_schema(chart)
    report.findings += schema_findings
    report.notes += [f"values.schema.json {line}" for line in schema_lines]
    report.findings = merge_values_labels(report.findings, [label for label, _ in sets])
    return report


def merge_values_labels(findings: list[Finding], labels: list[str]) -> list[Finding]:
    """A finding that several values files repeat, told once, naming them all."""
    merged: dict[tuple, list[str]] = {}
    for finding in findings:
        label = next((label for label in labels if finding.where.startswith(label + ": ")), None)
        where = finding.where[len(label) + 2 :] if label else finding.where
        merged.setdefault((finding.rule, where, finding.message), [])
        if label and label not in merged[(finding.rule, where, finding.message)]:
            merged[(finding.rule, where, finding.message)].append(label)
    return [
        Finding(rule, f"{', '.join(found_in)}: {where}" if found_in else where, message)
        for (rule, where, message), found_in in merged.items()
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="chart-check", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--chart",
        type=Path,
        default=DEFAULT_CHART,
        help=f"the chart folder (default {DEFAULT_CHART.relative_to(ROOT)})",
    )
    parser.add_argument(
        "--crds", type=Path, default=DEFAULT_CRDS, help="the CRDs the chart's crds/ must equal (default crds/)"
    )
    parser.add_argument("--release", default=RELEASE)
    parser.add_argument("--namespace", default=NAMESPACE)
    parser.add_argument("--kube-version", default=KUBE_VERSION)
    parser.add_argument(
        "--token-components",
        default=",".join(TOKEN_COMPONENTS),
        help="the components whose pods need an API token (comma-separated; default %(default)s)",
    )
    args = parser.parse_args(argv)

    chart_dir = args.chart.resolve()
    shown = chart_dir.relative_to(ROOT) if chart_dir.is_relative_to(ROOT) else chart_dir
    print(f"chart-check: {shown} (release {args.release}, namespace {args.namespace}, Kubernetes {args.kube_version})")
    if not chart_dir.is_dir():
        print(f"FAIL {shown}: [chart] the chart does not exist (make chart-check checks charts/yuxi-operator)")
        print("chart-check: 1 problem")
        return 1
    components = [c for c in args.token_components.split(",") if c]
    report = check_chart(chart_dir, args.crds.resolve(), args.release, args.namespace, args.kube_version, components)
    for note in report.notes:
        print(f"  {note}")
    for finding in report.findings:
        print(f"FAIL {finding}")
    count = len(report.findings)
    if count:
        print(f"chart-check: {count} problem{'s' if count != 1 else ''}")
        return 1
    print("chart-check: ok")
    return 0
