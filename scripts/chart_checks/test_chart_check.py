"""Tests of the chart checks themselves: crafted bad objects are caught, good ones pass, and the small chart
in fixtures/ passes whole (and fails once broken). Run with the venv's Python (make chart-check does):

    .venv/bin/python -m unittest discover -s scripts/chart_checks -p 'test_*.py'
"""

from __future__ import annotations

import base64
import copy
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chart_check as cc  # noqa: E402
import pss  # noqa: E402

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "yuxi-operator"
NS = cc.NAMESPACE
PEM = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").decode()


def rules(findings, rule):
    return [f for f in findings if f.rule == rule]


# ---------------------------------------------------------------------------------------------------------
# Pod Security: the same cases as tests/controller/sandbox_pod.rs holds the Rust checker to.


def restricted_pod():
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ok"},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
    }


def c0(p):
    return p["spec"]["containers"][0]["securityContext"]


def changed(change):
    pod = restricted_pod()
    change(pod)
    return pss.check_restricted(pod)


def _set(target, key, value):
    target[key] = value


class PodSecurityTest(unittest.TestCase):
    def test_passes_a_restricted_pod_and_what_the_profile_allows(self):
        self.assertEqual(pss.check_restricted(restricted_pod()), [])
        allowed = {
            "NET_BIND_SERVICE": lambda p: _set(c0(p)["capabilities"], "add", ["NET_BIND_SERVICE"]),
            "a safe sysctl": lambda p: _set(
                p["spec"]["securityContext"], "sysctls", [{"name": "net.ipv4.tcp_rmem", "value": "4096 87380 6291456"}]
            ),
            "seccomp per container": lambda p: (
                _set(p["spec"], "securityContext", {"runAsNonRoot": True}),
                _set(c0(p), "seccompProfile", {"type": "Localhost", "localhostProfile": "p.json"}),
            ),
            "runAsNonRoot per container": lambda p: (
                _set(p["spec"]["securityContext"], "runAsNonRoot", None),
                _set(c0(p), "runAsNonRoot", True),
            ),
            "allowed volumes": lambda p: _set(
                p["spec"],
                "volumes",
                [
                    {"name": "a", "configMap": {"name": "c"}},
                    {"name": "b", "secret": {"secretName": "s"}},
                    {"name": "c", "persistentVolumeClaim": {"claimName": "d"}},
                    {"name": "d", "projected": {"sources": []}},
                    {"name": "e", "downwardAPI": {}},
                    {"name": "f", "csi": {"driver": "x"}},
                    {"name": "g", "ephemeral": {}},
                ],
            ),
            "an allowed SELinux type": lambda p: _set(
                p["spec"]["securityContext"], "seLinuxOptions", {"type": "container_init_t", "level": "s0:c1,c2"}
            ),
            "AppArmor RuntimeDefault": lambda p: (
                _set(p["spec"]["securityContext"], "appArmorProfile", {"type": "RuntimeDefault"}),
                _set(
                    p["metadata"], "annotations", {"container.apparmor.security.beta.kubernetes.io/main": "localhost/x"}
                ),
            ),
            "a non-root uid": lambda p: _set(c0(p), "runAsUser", 1000),
            "host port 0": lambda p: _set(p["spec"]["containers"][0], "ports", [{"containerPort": 80, "hostPort": 0}]),
        }
        for what, change in allowed.items():
            with self.subTest(what):
                self.assertEqual(changed(change), [])

    def test_finds_each_violation_and_names_it(self):
        def init_privileged(p):
            init = copy.deepcopy(p["spec"]["containers"][0])
            init["securityContext"]["privileged"] = True
            p["spec"]["initContainers"] = [init]

        host_path = [{"name": "h", "hostPath": {"path": "/"}}]
        cases = [
            (
                "HostProcess",
                "spec.containers[0].securityContext.windowsOptions.hostProcess",
                lambda p: _set(c0(p), "windowsOptions", {"hostProcess": True}),
            ),
            ("Host Namespaces", "spec.hostNetwork", lambda p: _set(p["spec"], "hostNetwork", True)),
            ("Host Namespaces", "spec.hostPID", lambda p: _set(p["spec"], "hostPID", True)),
            ("Host Namespaces", "spec.hostIPC", lambda p: _set(p["spec"], "hostIPC", True)),
            (
                "Privileged Containers",
                "spec.containers[0].securityContext.privileged",
                lambda p: _set(c0(p), "privileged", True),
            ),
            (
                "Capabilities",
                "spec.containers[0].securityContext.capabilities.add",
                lambda p: _set(c0(p)["capabilities"], "add", ["CHOWN"]),
            ),
            (
                "Capabilities (baseline)",
                "spec.containers[0].securityContext.capabilities.add",
                lambda p: _set(c0(p)["capabilities"], "add", ["SYS_ADMIN"]),
            ),
            (
                "Capabilities",
                "spec.containers[0].securityContext.capabilities.drop",
                lambda p: _set(c0(p)["capabilities"], "drop", ["NET_RAW"]),
            ),
            ("HostPath Volumes", "spec.volumes[0].hostPath", lambda p: _set(p["spec"], "volumes", host_path)),
            ("Volume Types", "spec.volumes[0].hostPath", lambda p: _set(p["spec"], "volumes", host_path)),
            (
                "Volume Types",
                "spec.volumes[1].nfs",
                lambda p: _set(
                    p["spec"],
                    "volumes",
                    [{"name": "a", "emptyDir": {}}, {"name": "n", "nfs": {"server": "s", "path": "/"}}],
                ),
            ),
            (
                "Host Ports",
                "spec.containers[0].ports[0].hostPort",
                lambda p: _set(p["spec"]["containers"][0], "ports", [{"containerPort": 80, "hostPort": 8080}]),
            ),
            (
                "AppArmor",
                "spec.securityContext.appArmorProfile.type",
                lambda p: _set(p["spec"]["securityContext"], "appArmorProfile", {"type": "Unconfined"}),
            ),
            (
                "AppArmor",
                'metadata.annotations["container.apparmor.security.beta.kubernetes.io/main"]',
                lambda p: _set(
                    p["metadata"], "annotations", {"container.apparmor.security.beta.kubernetes.io/main": "unconfined"}
                ),
            ),
            (
                "SELinux",
                "spec.securityContext.seLinuxOptions.type",
                lambda p: _set(p["spec"]["securityContext"], "seLinuxOptions", {"type": "spc_t"}),
            ),
            (
                "SELinux",
                "spec.containers[0].securityContext.seLinuxOptions.user",
                lambda p: _set(c0(p), "seLinuxOptions", {"user": "system_u"}),
            ),
            (
                "SELinux",
                "spec.containers[0].securityContext.seLinuxOptions.role",
                lambda p: _set(c0(p), "seLinuxOptions", {"role": "sysadm_r"}),
            ),
            (
                "/proc Mount Type",
                "spec.containers[0].securityContext.procMount",
                lambda p: _set(c0(p), "procMount", "Unmasked"),
            ),
            (
                "Seccomp",
                "spec.securityContext.seccompProfile.type",
                lambda p: _set(p["spec"]["securityContext"], "seccompProfile", {"type": "Unconfined"}),
            ),
            (
                "Seccomp",
                "spec.containers[0].securityContext.seccompProfile.type",
                lambda p: _set(p["spec"]["securityContext"], "seccompProfile", None),
            ),
            (
                "Sysctls",
                "spec.securityContext.sysctls[0].name",
                lambda p: _set(p["spec"]["securityContext"], "sysctls", [{"name": "kernel.msgmax", "value": "1"}]),
            ),
            (
                "Privilege Escalation",
                "spec.containers[0].securityContext.allowPrivilegeEscalation",
                lambda p: _set(c0(p), "allowPrivilegeEscalation", None),
            ),
            (
                "Privilege Escalation",
                "spec.containers[0].securityContext.allowPrivilegeEscalation",
                lambda p: _set(c0(p), "allowPrivilegeEscalation", True),
            ),
            (
                "Running as Non-root",
                "spec.containers[0].securityContext.runAsNonRoot",
                lambda p: _set(c0(p), "runAsNonRoot", False),
            ),
            (
                "Running as Non-root",
                "spec.containers[0].securityContext.runAsNonRoot",
                lambda p: _set(p["spec"]["securityContext"], "runAsNonRoot", None),
            ),
            (
                "Running as Non-root",
                "spec.securityContext.runAsNonRoot",
                lambda p: _set(p["spec"]["securityContext"], "runAsNonRoot", False),
            ),
            (
                "Running as Non-root user",
                "spec.securityContext.runAsUser",
                lambda p: _set(p["spec"]["securityContext"], "runAsUser", 0),
            ),
            (
                "Running as Non-root user",
                "spec.containers[0].securityContext.runAsUser",
                lambda p: _set(c0(p), "runAsUser", 0),
            ),
            (
                "Host Probes / Lifecycle Hooks",
                "spec.containers[0].livenessProbe.httpGet.host",
                lambda p: _set(
                    p["spec"]["containers"][0], "livenessProbe", {"httpGet": {"port": 80, "host": "10.0.0.1"}}
                ),
            ),
            (
                "Host Probes / Lifecycle Hooks",
                "spec.containers[0].lifecycle.preStop.tcpSocket.host",
                lambda p: _set(
                    p["spec"]["containers"][0], "lifecycle", {"preStop": {"tcpSocket": {"port": 80, "host": "node"}}}
                ),
            ),
            ("Privileged Containers", "spec.initContainers[0].securityContext.privileged", init_privileged),
            (
                "Capabilities",
                "spec.ephemeralContainers[0].securityContext.capabilities.drop",
                lambda p: _set(
                    p["spec"],
                    "ephemeralContainers",
                    [{"name": "debug", "image": "busybox", "securityContext": {"allowPrivilegeEscalation": False}}],
                ),
            ),
        ]
        for control, field, change in cases:
            with self.subTest(f"{control} at {field}"):
                found = changed(change)
                self.assertTrue(
                    any(v.control == control and v.field == field for v in found),
                    f"expected {control} at {field}, found: {'; '.join(map(str, found))}",
                )
                for v in found:
                    self.assertTrue(str(v).startswith(f"{v.control}: {v.field}: "), str(v))

    def test_windows_pods_skip_the_linux_only_controls(self):
        def windows(p):
            p["spec"]["os"] = {"name": "windows"}
            p["spec"]["securityContext"] = {"runAsNonRoot": True}
            p["spec"]["containers"][0]["securityContext"] = {}

        self.assertEqual(changed(windows), [])


# ---------------------------------------------------------------------------------------------------------
# Crafted objects.


def deployment(name, component, pod_spec_extra=None, ports=None):
    pod = restricted_pod()
    spec = pod["spec"]
    if ports:
        spec["containers"][0]["ports"] = ports
    spec.update(pod_spec_extra or {})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/component": component}},
            "template": {"metadata": {"labels": {"app.kubernetes.io/component": component}}, "spec": spec},
        },
    }


def webhook_configuration(kind, path, ca_bundle=PEM, annotations=None, service="yuxi-webhook", port=443):
    webhooks = []
    for resource in ("agents", "agentruns"):
        client = {"service": {"name": service, "namespace": NS, "port": port, "path": path}}
        if ca_bundle is not None:
            client["caBundle"] = ca_bundle
        webhooks.append(
            {
                "name": f"{resource}.{kind.lower()}.yuxi.dev",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "clientConfig": client,
                "rules": [
                    {
                        "apiGroups": ["yuxi.dev"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [resource],
                    }
                ],
            }
        )
    metadata = {"name": f"yuxi-{kind.lower()}"}
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": metadata, "webhooks": webhooks}


def good_objects(cert_manager=False):
    """A webhook setup that passes: configurations, the Service, the webhook's Deployment (and cert-manager's
    Certificate)."""
    annotations = {cc.INJECT_CA: f"{NS}/yuxi-webhook"} if cert_manager else None
    ca = None if cert_manager else PEM
    docs = [
        webhook_configuration("ValidatingWebhookConfiguration", "/validate", ca, annotations),
        webhook_configuration("MutatingWebhookConfiguration", "/mutate", ca, annotations),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "yuxi-webhook"},
            "spec": {
                "selector": {"app.kubernetes.io/component": "webhook"},
                "ports": [{"name": "https", "port": 443, "targetPort": "https"}],
            },
        },
        deployment("yuxi-webhook", "webhook", ports=[{"name": "https", "containerPort": 8443}]),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "yuxi"},
            "rules": [{"apiGroups": ["yuxi.dev"], "resources": ["agents"], "verbs": ["get", "list", "watch"]}],
        },
    ]
    if cert_manager:
        docs.append(
            {
                "apiVersion": "cert-manager.io/v1",
                "kind": "Certificate",
                "metadata": {"name": "yuxi-webhook"},
                "spec": {
                    "secretName": "yuxi-webhook-tls",
                    "dnsNames": [f"yuxi-webhook.{NS}.svc"],
                    "issuerRef": {"name": "selfsigned"},
                },
            }
        )
    return [cc.Obj(doc, "templates/crafted.yaml", "crafted") for doc in docs]


def find(objects, kind):
    return next(o for o in objects if o.kind == kind)


class WebhookTest(unittest.TestCase):
    def test_good_webhooks_pass_both_ways(self):
        for cert_manager in (False, True):
            with self.subTest(cert_manager=cert_manager):
                self.assertEqual(cc.check_webhooks(good_objects(cert_manager)), [])

    def assertCaught(self, objects, rule, words):
        found = rules(cc.check_webhooks(objects), rule)
        self.assertTrue(any(words in f.message for f in found), f"expected [{rule}] {words!r}, found {found}")
        return found

    def test_a_webhook_pointing_at_a_missing_service(self):
        objects = [o for o in good_objects() if o.kind != "Service"]
        found = self.assertCaught(objects, "webhook service", f"Service {NS}/yuxi-webhook is not rendered")
        self.assertIn("ValidatingWebhookConfiguration/yuxi-validatingwebhookconfiguration", found[0].where)

    def test_a_webhook_on_a_port_the_service_does_not_expose(self):
        objects = good_objects()
        find(objects, "ValidatingWebhookConfiguration").doc["webhooks"][0]["clientConfig"]["service"]["port"] = 8443
        self.assertCaught(objects, "webhook service", "exposes [443], not port 8443")

    def test_a_port_left_out_means_443(self):
        objects = good_objects()
        del find(objects, "MutatingWebhookConfiguration").doc["webhooks"][1]["clientConfig"]["service"]["port"]
        self.assertEqual(cc.check_webhooks(objects), [])

    def test_a_service_in_another_namespace_or_a_url(self):
        objects = good_objects()
        hooks = find(objects, "ValidatingWebhookConfiguration").doc["webhooks"]
        hooks[0]["clientConfig"]["service"]["namespace"] = "default"
        hooks[1]["clientConfig"] = {"url": "https://example.com/validate", "caBundle": PEM}
        self.assertCaught(objects, "webhook service", "not the release's yuxi-system")
        self.assertCaught(objects, "webhook service", "must name a service, not a url")

    def test_a_service_that_selects_no_pod(self):
        objects = [o for o in good_objects() if o.kind != "Deployment"]
        self.assertCaught(objects, "webhook service", "selects no rendered pod")
        objects = good_objects()
        find(objects, "Deployment").doc["spec"]["template"]["spec"]["containers"][0]["ports"] = [
            {"containerPort": 9443}
        ]
        self.assertCaught(objects, "webhook service", "targets port 'https'")

    def test_the_wrong_path(self):
        objects = good_objects()
        find(objects, "MutatingWebhookConfiguration").doc["webhooks"][0]["clientConfig"]["service"][
            "path"
        ] = "/validate"
        self.assertCaught(objects, "webhook service", "path is '/validate', not /mutate")

    def test_a_webhook_without_ca(self):
        objects = good_objects()
        del find(objects, "ValidatingWebhookConfiguration").doc["webhooks"][1]["clientConfig"]["caBundle"]
        found = self.assertCaught(objects, "webhook CA", "no clientConfig.caBundle")
        self.assertIn("agentruns.validatingwebhookconfiguration.yuxi.dev", found[0].where)
        objects = good_objects()
        find(objects, "MutatingWebhookConfiguration").doc["webhooks"][0]["clientConfig"][
            "caBundle"
        ] = "bm90IGEgY2VydA=="
        self.assertCaught(objects, "webhook CA", "not a base64 PEM certificate")

    def test_cert_manager_injection_needs_a_rendered_certificate_for_the_service(self):
        objects = [o for o in good_objects(cert_manager=True) if o.kind != "Certificate"]
        self.assertCaught(objects, "webhook CA", "names no rendered cert-manager Certificate")
        objects = good_objects(cert_manager=True)
        find(objects, "ValidatingWebhookConfiguration").doc["metadata"]["annotations"][cc.INJECT_CA] = "yuxi-webhook"
        self.assertCaught(objects, "webhook CA", "is not <namespace>/<certificate>")
        objects = good_objects(cert_manager=True)
        find(objects, "Certificate").doc["spec"]["dnsNames"] = ["yuxi-webhook"]
        self.assertCaught(objects, "webhook CA", f"lack yuxi-webhook.{NS}.svc")

    def test_fail_closed_no_side_effects_v1_and_a_timeout(self):
        objects = good_objects()
        hook = find(objects, "ValidatingWebhookConfiguration").doc["webhooks"][0]
        hook["failurePolicy"] = "Ignore"
        hook["sideEffects"] = "Some"
        hook["admissionReviewVersions"] = ["v1beta1"]
        del hook["timeoutSeconds"]
        for words in ("not Fail", "not None", "lacks v1", "timeoutSeconds must be set"):
            self.assertCaught(objects, "webhooks", words)

    def test_both_resources_and_both_configurations(self):
        objects = good_objects()
        find(objects, "MutatingWebhookConfiguration").doc["webhooks"].pop()
        self.assertCaught(objects, "webhooks", "no webhook has a rule for yuxi.dev agentruns")
        objects = [o for o in good_objects() if o.kind != "ValidatingWebhookConfiguration"]
        self.assertCaught(objects, "webhooks", "no ValidatingWebhookConfiguration is rendered")
        objects = good_objects()
        find(objects, "ValidatingWebhookConfiguration").doc["webhooks"][0]["rules"][0]["operations"] = ["CREATE"]
        self.assertCaught(objects, "webhooks", "rules for agents cover ['CREATE'], not ['CREATE', 'UPDATE']")


class DashboardTest(unittest.TestCase):
    def dashboard(self, text):
        doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "yuxi-dashboard"}, "data": {"d.json": text}}
        return [cc.Obj(doc, "templates/dashboard.yaml", "crafted")]

    def test_a_dashboard_of_titled_queried_panels_passes(self):
        good = '{"panels": [{"type": "row", "id": 1}, {"id": 2, "title": "Runs", "targets": [{"expr": "up"}]}]}'
        self.assertEqual(cc.check_dashboards(self.dashboard(good)), [])

    def test_broken_json_and_a_panel_without_a_query_are_named(self):
        broken = cc.check_dashboards(self.dashboard("{panels: ["))
        self.assertTrue(any("is not JSON" in f.message for f in broken), broken)
        empty = cc.check_dashboards(self.dashboard('{"panels": [{"id": 7, "title": "x", "targets": []}]}'))
        self.assertTrue(any("panel 7" in f.message for f in empty), empty)


class RbacTest(unittest.TestCase):
    def test_wildcards_are_caught_in_every_field(self):
        self.assertEqual(cc.check_rbac_rules(good_objects()), [])
        for name, value in (
            ("apiGroups", "*"),
            ("resources", "*"),
            ("verbs", "*"),
            ("resourceNames", "*"),
            ("resources", "pods/*"),
        ):
            with self.subTest(name=name, value=value):
                objects = good_objects()
                role = find(objects, "ClusterRole")
                role.doc["rules"].append({"apiGroups": [""], "resources": ["pods"], "verbs": ["get"], name: [value]})
                found = cc.check_rbac_rules(objects)
                self.assertEqual(len(found), 1, found)
                self.assertEqual(found[0].rule, "RBAC wildcard")
                self.assertIn(f"ClusterRole/yuxi: rules[1].{name}", found[0].where)

    def test_every_rule_needs_a_comment_above(self):
        text = """rules:
  # Reads the Agents.
  - apiGroups: [yuxi.dev]
    resources: [agents]
    verbs: [get]

  # Writes status.

  - apiGroups: [yuxi.dev]
    resources: [agents/status]
    verbs: [patch]
  - apiGroups: [""]
    resources: [pods]
    verbs: [create]
  {{- if .Values.x }}
  - verbs: [get]
    apiGroups: [""]
    resources: [secrets]
  {{- end }}
  #
  - {apiGroups: [""], resources: [events], verbs: [create]}
"""
        self.assertEqual([n for n, _ in cc.uncommented_rules(text)], [12, 16, 21])

    def test_comments_are_checked_in_the_files_that_render_roles(self):
        with tempfile.TemporaryDirectory() as tmp:
            chart = Path(tmp)
            (chart / "templates").mkdir()
            (chart / "templates" / "role.yaml").write_text("rules:\n  - apiGroups: ['']\n    verbs: [get]\n")
            (chart / "templates" / "_rules.tpl").write_text(
                "{{- define \"r\" }}\n- apiGroups: ['']\n  verbs: [list]\n{{- end }}\n"
            )
            (chart / "templates" / "webhook.yaml").write_text(
                "rules:\n  - apiGroups: [yuxi.dev]\n    operations: [CREATE]\n"
            )
            objects = [cc.Obj({"kind": "Role", "metadata": {"name": "r"}}, "templates/role.yaml")]
            files = cc.rbac_template_files(chart, objects)
            self.assertEqual(files, ["templates/_rules.tpl", "templates/role.yaml"])
            found = cc.check_rbac_comments(chart, files)
            self.assertEqual([f.where for f in found], ["templates/_rules.tpl:2", "templates/role.yaml:2"])


class PodTest(unittest.TestCase):
    def test_a_privileged_pod_is_caught_with_its_path(self):
        objects = good_objects()
        self.assertEqual(cc.check_pod_security(objects), [])
        find(objects, "Deployment").doc["spec"]["template"]["spec"]["containers"][0]["securityContext"][
            "privileged"
        ] = True
        found = cc.check_pod_security(objects)
        self.assertEqual(len(found), 1, found)
        self.assertEqual(found[0].rule, "Pod Security restricted: Privileged Containers")
        self.assertTrue(
            found[0].where.endswith(
                "Deployment/yuxi-webhook: spec.template.spec.containers[0].securityContext.privileged"
            )
        )

    def test_every_kind_of_pod_template(self):
        pod = restricted_pod()
        pod["spec"]["hostPID"] = True
        template = {"metadata": {}, "spec": pod["spec"]}
        docs = [
            pod,
            {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"template": template}},
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": "c"},
                "spec": {"jobTemplate": {"spec": {"template": template}}},
            },
            {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"template": template}},
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "d"}, "spec": {"template": template}},
        ]
        found = cc.check_pod_security([cc.Obj(d) for d in docs])
        self.assertEqual(
            [f.where.split(": ", 2)[2] for f in found],
            [
                "Pod/ok: spec.hostPID",
                "Job/j: spec.template.spec.hostPID",
                "CronJob/c: spec.jobTemplate.spec.template.spec.hostPID",
                "StatefulSet/s: spec.template.spec.hostPID",
                "DaemonSet/d: spec.template.spec.hostPID",
            ],
        )

    def test_tokens(self):
        sa = cc.Obj(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": "quiet"},
                "automountServiceAccountToken": False,
            }
        )
        controller = cc.Obj(deployment("yuxi-controller", "controller"))
        redis = cc.Obj(deployment("yuxi-redis", "redis"))
        findings, lines = cc.check_tokens([controller, redis])
        self.assertEqual([f.where for f in findings], ["(crafted): (crafted): Deployment/yuxi-redis"])
        self.assertIn("set automountServiceAccountToken: false", findings[0].message)
        self.assertEqual(
            lines[0],
            "Deployment/yuxi-controller (controller): mounts a token "
            "(automountServiceAccountToken unset on the pod and on ServiceAccount default)",
        )
        # Deliberately off, on the pod or on its ServiceAccount.
        redis = cc.Obj(deployment("yuxi-redis", "redis", {"automountServiceAccountToken": False}))
        other = cc.Obj(deployment("yuxi-other", "other", {"serviceAccountName": "quiet"}))
        self.assertEqual(cc.check_tokens([controller, redis, other, sa])[0], [])
        # A projected token is a token.
        projected = {
            "volumes": [{"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}}],
            "automountServiceAccountToken": False,
        }
        self.assertEqual(len(cc.check_tokens([cc.Obj(deployment("yuxi-redis", "redis", projected))])[0]), 1)
        # The controller cannot work without one.
        controller = cc.Obj(deployment("yuxi-controller", "controller", {"serviceAccountName": "quiet"}))
        findings = cc.check_tokens([controller, sa])[0]
        self.assertEqual(len(findings), 1)
        self.assertIn("talks to the API but gets no token", findings[0].message)

    def test_component_from_the_name_when_unlabelled(self):
        doc = deployment("yuxi-operator-api", "x")
        del doc["spec"]["template"]["metadata"]["labels"]
        obj = cc.Obj(doc)
        self.assertEqual(cc.component_of(obj, cc.pod_templates([obj])[0][2], cc.TOKEN_COMPONENTS), "api")


class SchemaTest(unittest.TestCase):
    def test_strict_schemas_and_unknown_kinds(self):
        good = good_objects(cert_manager=True)
        findings, skipped = cc.validate_schemas(good)
        self.assertEqual(findings, [])
        self.assertEqual([o.ref for o in skipped], ["Certificate/yuxi-webhook"])
        bad = cc.Obj({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {"bogus": 1}})
        misspelt = cc.Obj({"apiVersion": "apps/v1", "kind": "Deploymnt", "metadata": {"name": "d"}})
        nameless = cc.Obj({"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": {}})
        findings, skipped = cc.validate_schemas([bad, misspelt, nameless])
        self.assertEqual(skipped, [])
        self.assertEqual(len(findings), 3, findings)
        self.assertIn("bogus", findings[0].message)
        self.assertIn("has no apps/v1 Deploymnt", findings[1].message)
        self.assertIn("no metadata.name", findings[2].message)

    def test_rendered_files(self):
        manifests = {
            "yuxi-operator/templates/NOTES.txt": "Installed {{ not yaml",
            "yuxi-operator/templates/a.yaml": "\n---\n# Source: a\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n",
            "yuxi-operator/templates/b.yaml": "- just\n- a list\n",
            "yuxi-operator/templates/c.yaml": "key: [unclosed\n",
        }
        objects, findings = cc.parse_rendered(manifests, "default values", "yuxi-operator")
        self.assertEqual([o.where for o in objects], ["default values: templates/a.yaml: ConfigMap/a"])
        self.assertEqual(
            [(f.where, f.message.split(":")[0]) for f in findings],
            [
                ("default values: templates/b.yaml", "a document that is not a mapping"),
                ("default values: templates/c.yaml", "does not parse"),
            ],
        )

    def test_duplicates(self):
        objects = good_objects() + [cc.Obj(good_objects()[2].doc, "templates/other.yaml")]
        found = cc.check_duplicates(objects)
        self.assertEqual(len(found), 1)
        self.assertIn("also rendered by templates/crafted.yaml", found[0].message)


class CrdTest(unittest.TestCase):
    def test_same_names_same_bytes(self):
        with tempfile.TemporaryDirectory() as tmp:
            chart, crds = Path(tmp, "chart"), Path(tmp, "crds")
            (chart / "crds").mkdir(parents=True)
            crds.mkdir()
            for name in ("agent.yaml", "agentrun.yaml"):
                (crds / name).write_text(f"kind: CustomResourceDefinition # {name}\n")
                (chart / "crds" / name).write_text(f"kind: CustomResourceDefinition # {name}\n")
            self.assertEqual(cc.check_crds(chart, crds), [])
            (chart / "crds" / "agent.yaml").write_text("kind: CustomResourceDefinition # agent.yaml \n")
            (chart / "crds" / "agentrun.yaml").rename(chart / "crds" / "agent-run.yaml")
            found = [str(f) for f in cc.check_crds(chart, crds)]
            self.assertEqual(len(found), 3, found)
            self.assertTrue(found[0].startswith("crds/agentrun.yaml: [CRDs] missing from the chart"), found)
            self.assertTrue(found[1].startswith("crds/agent-run.yaml: [CRDs] is not in"), found)
            self.assertTrue(found[2].startswith("crds/agent.yaml: [CRDs] differs"), found)


# ---------------------------------------------------------------------------------------------------------
# A whole chart.


class FixtureChartTest(unittest.TestCase):
    def check(self, chart_dir):
        return cc.check_chart(chart_dir, chart_dir / "crds")

    def test_the_fixture_passes(self):
        report = self.check(FIXTURE)
        self.assertEqual(report.findings, [])
        notes = "\n".join(report.notes)
        self.assertIn("ci/cert-manager-values.yaml: helm lint --strict", notes)
        self.assertIn("checked for apiVersion/kind/name only: cert-manager.io/v1 Issuer/", notes)
        self.assertIn("Deployment/yuxi-yuxi-redis (redis): no token", notes)
        self.assertEqual(sum("values.schema.json refuses" in n for n in report.notes), 3)

    def test_a_broken_copy_fails_each_way(self):
        with tempfile.TemporaryDirectory() as tmp:
            chart = Path(tmp, "yuxi-operator")
            shutil.copytree(FIXTURE, chart)

            def edit(name, old, new):
                path = chart / name
                text = path.read_text()
                self.assertIn(old, text)
                path.write_text(text.replace(old, new, 1))

            edit("templates/rbac.yaml", "  # Conditions and phases.\n", "")
            edit("templates/rbac.yaml", "verbs: [get, list, watch]", "verbs: ['*']")
            edit("templates/redis.yaml", "      automountServiceAccountToken: false\n", "")
            edit(
                "templates/controller.yaml",
                "image: {{ .Values.image }}",
                "image: {{ .Values.image }}\n          privileged: true",
            )
            edit(
                "values.schema.json",
                '"failurePolicy": {"enum": ["Fail", "Ignore"]}',
                '"failurePolicy": {"type": "string"}',
            )
            edit("values.yaml", "failurePolicy: Fail", "failurePolicy: Ignore")
            (chart / "crds" / "extra.yaml").write_text("kind: CustomResourceDefinition\n")
            report = cc.check_chart(chart, FIXTURE / "crds")
            text = "\n".join(map(str, report.findings))
            for expected in (
                "templates/rbac.yaml:18: [RBAC rule comment]",
                "default values, ci/cert-manager-values.yaml: templates/rbac.yaml: ClusterRole/yuxi-yuxi:"
                " rules[0].verbs: [RBAC wildcard]",
                "Deployment/yuxi-yuxi-redis: [API token]",
                "Deployment/yuxi-yuxi-controller: [Kubernetes schema] spec.template.spec.containers.0:",
                "[values schema] accepts webhook.failurePolicy: Sometimes",
                "failurePolicy is 'Ignore', not Fail",
                "crds/extra.yaml: [CRDs] is not in",
            ):
                self.assertIn(expected, text)

    def test_lint_warnings_fail(self):
        with tempfile.TemporaryDirectory() as tmp:
            chart = Path(tmp, "yuxi-operator")
            shutil.copytree(FIXTURE, chart)
            (chart / "templates" / "pdb.yaml").write_text(
                "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: x\nspec:\n  minAvailable: 1\n"
            )
            found = cc.lint(chart, "default values", {})
            self.assertEqual(len(found), 1, found)
            self.assertEqual(found[0].where, "default values: templates/pdb.yaml")
            self.assertIn("warning: policy/v1beta1 PodDisruptionBudget is deprecated", found[0].message)

    def test_a_missing_chart_fails_loudly(self):
        with tempfile.TemporaryDirectory() as tmp:
            report = cc.check_chart(Path(tmp))
            self.assertEqual([f.rule for f in report.findings], ["chart"])
            devnull = open(os.devnull, "w")
            self.addCleanup(devnull.close)
            stdout, sys.stdout = sys.stdout, devnull
            try:
                self.assertEqual(cc.main(["--chart", str(Path(tmp, "nothing"))]), 1)
            finally:
                sys.stdout = stdout


if __name__ == "__main__":
    unittest.main()
