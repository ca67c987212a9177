"""What can be checked of the kind path (e2e/kind/) without Docker.

Static checks run everywhere; the server-side dry-run of the manifests needs
the local test-bed (marked ``testbed``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from e2e.testbed.fakedriver import device_class
from e2e.testbed.kubeclient import KubeClient, api_path
from e2e.testbed.kubeletplugin.config import (
    DEFAULT_CDI_DIR,
    DEFAULT_PLUGINS_DIR,
    DEFAULT_REGISTRY_DIR,
    PluginConfig,
)
from e2e.testbed.paths import E2E_DIR

KIND_DIR = E2E_DIR / "kind"
DRIVER_MANIFEST = KIND_DIR / "manifests" / "fake-dra-driver.yaml"
Obj = dict[str, Any]

# kind -> (group/version, plural, namespaced)
_RESOURCES: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("v1", "namespaces", False),
    "ServiceAccount": ("v1", "serviceaccounts", True),
    "ClusterRole": ("rbac.authorization.k8s.io/v1", "clusterroles", False),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io/v1", "clusterrolebindings", False),
    "DeviceClass": ("resource.k8s.io/v1", "deviceclasses", False),
    "DaemonSet": ("apps/v1", "daemonsets", True),
}


def driver_objects() -> list[Obj]:
    return [d for d in yaml.safe_load_all(DRIVER_MANIFEST.read_text()) if d]


def by_kind(kind: str) -> Obj:
    matches = [o for o in driver_objects() if o["kind"] == kind]
    assert len(matches) == 1, kind
    return matches[0]


def test_manifest_has_the_expected_objects() -> None:
    assert sorted(o["kind"] for o in driver_objects()) == sorted(_RESOURCES)


def test_device_class_is_the_testbeds() -> None:
    """The same DeviceClass the test-bed's fake driver creates (name, selector, label)."""
    assert by_kind("DeviceClass") == device_class()


def test_daemonset_mounts_the_kubelets_paths_at_the_same_place() -> None:
    pod = by_kind("DaemonSet")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    host = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"]}
    assert mounts == host  # same path inside and on the node
    assert set(mounts.values()) == {str(DEFAULT_REGISTRY_DIR), str(DEFAULT_PLUGINS_DIR), str(DEFAULT_CDI_DIR)}
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    probe = container["livenessProbe"]["exec"]["command"]
    assert probe[-1] == str(PluginConfig(node_name="n").dra_socket)
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4"}
    assert container["securityContext"]["privileged"] is False


def test_rbac_covers_what_the_plugin_calls() -> None:
    rules = by_kind("ClusterRole")["rules"]

    def verbs(group: str, resource: str) -> set[str]:
        return {
            v for r in rules if group in r["apiGroups"] and resource in r["resources"] for v in r["verbs"]
        }

    assert {"get"} <= verbs("resource.k8s.io", "resourceclaims")
    assert {"get", "create", "patch", "delete"} <= verbs("resource.k8s.io", "resourceslices")
    assert {"get"} <= verbs("", "nodes")
    binding = by_kind("ClusterRoleBinding")
    sa = by_kind("ServiceAccount")["metadata"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}
    ]
    assert by_kind("DaemonSet")["spec"]["template"]["spec"]["serviceAccountName"] == sa["name"]


def test_kind_config() -> None:
    config = yaml.safe_load((KIND_DIR / "kind-config.yaml").read_text())
    roles = [n["role"] for n in config["nodes"]]
    assert roles == ["control-plane", "worker"]
    worker = config["nodes"][1]
    assert worker["labels"] == {"nvidia.com/gpu.product": "Tesla-T4"}
    assert all(re.fullmatch(r"kindest/node:v1\.36\.\d+", n["image"]) for n in config["nodes"])
    assert "enable_cdi = true" in config["containerdConfigPatches"][0]


def test_dockerfile_copies_what_the_plugin_imports() -> None:
    text = (KIND_DIR / "Dockerfile.driver").read_text()
    for path in ("e2e/testbed",):  # the plugin and its protos are part of it
        assert f"COPY {path} {path}" in text
    assert 'ENTRYPOINT ["python", "-m", "e2e.testbed.kubeletplugin"]' in text


def test_readme_says_it_needs_docker() -> None:
    text = (KIND_DIR / "README.md").read_text()
    assert "Docker" in text
    assert "cannot run" in text


@pytest.mark.testbed
@pytest.mark.timeout(120)
@pytest.mark.asyncio
async def test_manifests_pass_server_side_dry_run(kube: KubeClient) -> None:
    """Every object is accepted by a Kubernetes 1.36 API server (dry-run apply, nothing kept).

    The Namespace does not exist on the test-bed, so namespaced objects are
    dry-run in ``default`` (the binding's subject is rewritten to match).
    """
    for obj in driver_objects():
        group_version, plural, namespaced = _RESOURCES[obj["kind"]]
        assert obj["apiVersion"] == group_version
        if namespaced:
            obj["metadata"]["namespace"] = "default"
        if obj["kind"] == "ClusterRoleBinding":
            obj["subjects"][0]["namespace"] = "default"
        namespace = obj["metadata"].get("namespace") if namespaced else None
        path = api_path(group_version, plural, namespace, obj["metadata"]["name"])
        answer = await kube.request(
            "PATCH",
            path,
            params={"dryRun": "All", "fieldManager": "kind-dry-run", "force": "true"},
            body=obj,
            content_type="application/apply-patch+yaml",
        )
        assert answer["kind"] == obj["kind"]
        assert answer["metadata"]["name"] == obj["metadata"]["name"]
    # Nothing was created.
    assert await kube.get_or_none(api_path("v1", "namespaces", name="fake-dra-driver")) is None
    assert (
        await kube.get_or_none(api_path("apps/v1", "daemonsets", "default", "fake-dra-driver-kubelet-plugin"))
        is None
    )
