"""Tests of the trust-boundary checks: the real chart passes them with its default values, and each hole
they guard against, put back into its rendered objects, is found. Run as the other checker tests are."""

from __future__ import annotations

import copy
import os
import re
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chart_check as cc  # noqa: E402
import trust  # noqa: E402

CHART = cc.ROOT / "charts" / "yuxi-operator"


def rendered(values=None):
    import helm_python as helm

    objects, findings = cc.render(helm.Chart.load(str(CHART)), "test values", values or {})
    assert not findings, findings
    return objects


def find(objects, kind, suffix):
    return next(o for o in objects if o.kind == kind and o.name.endswith(suffix))


class TrustTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.objects = rendered()

    def broken(self):
        return copy.deepcopy(self.objects)

    def messages(self, objects):
        return [f.message for f in trust.check_trust(objects)]

    def test_the_chart_draws_every_boundary(self):
        self.assertEqual(self.messages(self.objects), [])
        url = find(self.objects, "Secret", "-redis").doc["stringData"]["url"]
        self.assertRegex(url, r"^redis://:[A-Za-z0-9]{48}@yuxi-redis\.yuxi-system\.svc:6379$")

    def test_a_redis_without_a_password_is_found(self):
        objects = self.broken()
        redis = find(objects, "Deployment", "-redis")
        redis.doc["spec"]["template"]["spec"]["containers"][0]["args"] = ["--protected-mode", "no"]
        find(objects, "Secret", "-redis-config").doc["stringData"]["redis.conf"] = "save \"\"\n"
        find(objects, "Secret", "-redis").doc["stringData"]["url"] = "redis://yuxi-redis.yuxi-system.svc:6379"
        found = self.messages(objects)
        for message in (
            "Redis runs with --protected-mode no",
            "Redis reads no configuration file with its password",
            "no Redis configuration Secret sets requirepass (16+ characters)",
            "the Redis URL carries no password",
        ):
            self.assertIn(message, found)

    def test_redis_open_to_every_namespace_is_found(self):
        objects = self.broken()
        policy = find(objects, "NetworkPolicy", "-redis")
        policy.doc["spec"]["ingress"][0]["from"].append(
            {"namespaceSelector": {}, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "yuxi-sandbox"}}}
        )
        self.assertTrue(any("selects any namespace" in m for m in self.messages(objects)))

    def test_sandbox_egress_to_the_metadata_server_or_any_dns_is_found(self):
        objects = self.broken()
        policy = find(objects, "NetworkPolicy", "-sandbox")
        for rule in policy.doc["spec"]["egress"]:
            for peer in rule.get("to", []):
                if "ipBlock" in peer:
                    peer["ipBlock"]["except"] = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
            if {p["port"] for p in rule.get("ports", [])} == {53}:
                rule.pop("to")
        found = self.messages(objects)
        self.assertIn("egress to 0.0.0.0/0 does not except 169.254.0.0/16", found)
        self.assertIn("egress to 0.0.0.0/0 does not except 100.64.0.0/10", found)
        self.assertIn("DNS egress to any address (name the cluster DNS in `to`)", found)

    def test_the_signing_key_outside_the_api_or_no_secret_policy_is_found(self):
        objects = self.broken()
        controller = find(objects, "Deployment", "-controller")
        controller.doc["spec"]["template"]["spec"]["volumes"].append(
            {"name": "key", "secret": {"secretName": "yuxi-run-token-key"}}
        )
        objects = [o for o in objects if o.kind != "ValidatingAdmissionPolicy"]
        found = self.messages(objects)
        self.assertIn("the controller mounts the run-token key ['yuxi-run-token-key']", found)
        self.assertIn("no ValidatingAdmissionPolicy limits the Secrets the API creates", found)

    def test_the_users_files_mounted_writable_in_the_api_are_found(self):
        api = find(self.objects, "Deployment", "-api").doc["spec"]["template"]["spec"]["containers"][0]
        users = [m for m in api["volumeMounts"] if m.get("subPath") == "users"]
        self.assertEqual([(m["mountPath"], m.get("readOnly")) for m in users], [("/var/lib/yuxi/user-data/users", True)])
        self.assertIn("--user-data-dir=/var/lib/yuxi/user-data", api["args"])
        objects = self.broken()
        api = find(objects, "Deployment", "-api").doc["spec"]["template"]["spec"]["containers"][0]
        for mount in api["volumeMounts"]:
            if mount.get("subPath") == "users":
                mount.pop("readOnly")
        api["volumeMounts"].append({"name": "data", "mountPath": "/data"})
        found = self.messages(objects)
        self.assertIn("the API mounts the users' files writable (data at /var/lib/yuxi/user-data/users)", found)
        self.assertIn("the API mounts the users' files writable (data at /data)", found)

    def test_the_sandbox_image_in_a_release_pod_or_for_both_containers_is_found(self):
        settings = find(self.objects, "ConfigMap", "-sandbox-settings").doc["data"]["settings.yaml"]
        self.assertIn('image: "yuxi-operator:0.1.0"', settings)
        self.assertIn('sandboxImage: "yuxi-operator-sandbox:0.1.0"', settings)
        objects = self.broken()
        api = find(objects, "Deployment", "-api").doc["spec"]["template"]["spec"]["containers"][0]
        api["image"] = "yuxi-operator-sandbox:0.1.0"
        self.assertIn(
            "the api's container api runs yuxi-operator-sandbox:0.1.0, not the control-plane image yuxi-operator:0.1.0",
            self.messages(objects),
        )
        objects = rendered({"sandboxImage": {"repository": "yuxi-operator", "tag": "0.1.0"}})
        self.assertIn("the sandbox container runs the control-plane image yuxi-operator:0.1.0", self.messages(objects))

    def test_the_sandbox_image_follows_the_control_plane_image_unless_named(self):
        def images(values):
            settings = find(rendered(values), "ConfigMap", "-sandbox-settings").doc["data"]["settings.yaml"]
            return re.findall(r'^(?:image|sandboxImage): "(.*)"$', settings, re.M)

        self.assertEqual(
            images({"image": {"repository": "registry.example.com/yuxi-operator", "tag": "0.2.0"}}),
            ["registry.example.com/yuxi-operator:0.2.0", "registry.example.com/yuxi-operator-sandbox:0.2.0"],
        )
        self.assertEqual(
            images({"image": {"tag": "0.2.0"}, "sandboxImage": {"repository": "registry.example.com/toolbox"}}),
            ["yuxi-operator:0.2.0", "registry.example.com/toolbox:0.2.0"],
        )
        self.assertEqual(
            images({"sandboxImage": {"tag": "0.1.0-python"}}), ["yuxi-operator:0.1.0", "yuxi-operator-sandbox:0.1.0-python"]
        )

    def test_the_redis_password_is_the_same_in_every_served_namespace(self):
        objects = rendered({"watchNamespaces": ["team-a", "team-b"]})
        urls = {o.namespace(cc.NAMESPACE): o.doc["stringData"]["url"] for o in objects if o.kind == "Secret" and o.name == "yuxi-redis"}
        self.assertEqual(sorted(urls), ["team-a", "team-b", "yuxi-system"])
        self.assertEqual(len(set(urls.values())), 1, urls)
        self.assertEqual(self.messages(objects), [])


if __name__ == "__main__":
    unittest.main()
