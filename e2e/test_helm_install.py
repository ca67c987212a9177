"""`helm install` of the chart on a test-bed, and the walkthrough with what the chart created.

The chart is installed with the Prometheus add-on (the real prometheus-operator CRDs
applied first) as docs/deploy.md says: release record in `default`, objects
in dra-quota-system. Every object Helm rendered must then exist, the CRDs of crds/
established. The test-bed has no kubelet, so the Deployment's pods never run a
controller; the controller runs instead as a child process with a TokenRequest token
of the chart's ServiceAccount, the chart's ConfigMap as its configuration and leader
election through the chart's Role, and the walkthrough must pass with exactly that. An
upgrade that changes the configuration rolls the pods; uninstalling removes everything
but the CRDs (Helm never deletes those: they hold every queue and Workload).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from e2e.support.deploy import (
    ROOT,
    ControllerProcess,
    Discovery,
    apply_objects,
    request_token,
    token_kubeconfig,
)
from e2e.support.helm import Helm
from e2e.support.walkthrough_steps import cleanup_walkthrough, walkthrough_items_1_to_6
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.paths import binary_paths
from e2e.testbed.scenario import wait_for
from reconciler.config import load_config

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(420)]

RELEASE = "dra-quota-reconciler"
RELEASE_NAMESPACE = "default"
NAMESPACE = "dra-quota-system"
ACCOUNT = "dra-quota-reconciler"
USERNAME = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """A test-bed of this module's own: the chart creates the CRDs, so none may exist before."""
    with Testbed(run_dir=tmp_path_factory.mktemp("testbed-helm")) as bed:
        yield bed


@pytest.fixture(scope="module")
def helm(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(tmp_path_factory.mktemp("helm-home"), kubeconfig=testbed.kubeconfig)


@pytest.fixture(scope="module")
def release(testbed: Testbed, helm: Helm) -> Iterator[list[Obj]]:
    """The chart installed; yields the objects of `helm get manifest`. Uninstalled afterwards
    (unless a test did) and the namespace waited for."""

    async def monitoring_crds() -> None:
        crds = [yaml.safe_load(p.read_text()) for p in binary_paths().monitoring_crd_files()]
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await apply_objects(kube, crds)

    asyncio.run(monitoring_crds())
    helm.run(
        "install",
        RELEASE,
        str(helm.chart),
        "--namespace",
        RELEASE_NAMESPACE,
        "--set",
        "prometheus.enabled=true",
        # The test-bed has no Service networking: a Service-addressed webhook would refuse every
        # Job. e2e/test_controller_webhooks.py and test_deploy.py test the webhooks on loopback.
        "--set",
        "webhook.enabled=false",
        # Nor can a Service-backed APIService become available, and an unavailable aggregated API
        # stops namespace deletion cluster-wide: test_deploy.py serves the visibility API on
        # loopback, test_visibility.py through the aggregation layer.
        "--set",
        "visibility.enabled=false",
        "--timeout",
        "120s",
    )
    manifest = helm.run("get", "manifest", RELEASE, "--namespace", RELEASE_NAMESPACE).stdout
    try:
        yield [d for d in yaml.safe_load_all(manifest) if isinstance(d, dict)]
    finally:
        helm.run("uninstall", RELEASE, "--namespace", RELEASE_NAMESPACE, "--timeout", "120s", check=False)
        asyncio.run(_namespace_gone(testbed))


async def _namespace_gone(testbed: Testbed) -> None:
    async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
        path = api_path("v1", "namespaces", name=NAMESPACE)

        async def gone() -> bool:
            return await kube.get_or_none(path) is None

        await wait_for(f"namespace {NAMESPACE} to be deleted", gone, within=90)


@pytest_asyncio.fixture
async def admin(testbed: Testbed) -> Any:
    async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
        yield kube


def _chart_crds(helm: Helm) -> list[Obj]:
    return [yaml.safe_load(p.read_text()) for p in sorted((helm.chart / "crds").glob("*.yaml"))]


@pytest.mark.asyncio
async def test_install_creates_every_object(release: list[Obj], helm: Helm, admin: KubeClient) -> None:
    kinds = sorted(o["kind"] for o in release)
    assert kinds == sorted(
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRole",  # <name>-metrics-reader
            "ClusterRoleBinding",
            "ClusterRoleBinding",  # of metrics-reader, to prometheus.serviceAccount
            "Role",
            "RoleBinding",
            "ConfigMap",
            "Service",
            "Deployment",
            "PodDisruptionBudget",
            "ServiceMonitor",
            "PrometheusRule",
            "ConfigMap",
        ]
    )
    discovery = Discovery(admin)
    for obj in release:
        live = await admin.get(await discovery.path(obj))
        labels = live["metadata"]["labels"]
        assert labels["app.kubernetes.io/managed-by"] == "Helm", obj["metadata"]["name"]
        assert live["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE
        if "namespace" in obj["metadata"]:
            assert live["metadata"]["namespace"] == NAMESPACE
    namespace = await admin.get(api_path("v1", "namespaces", name=NAMESPACE))
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # The CRDs of crds/ were created by Helm (none existed on this test-bed) and are served.
    for crd in _chart_crds(helm):
        live = await admin.get(f"{CRDS}/{crd['metadata']['name']}")
        managers = {m["manager"] for m in live["metadata"]["managedFields"]}
        assert "helm" in managers, managers
        conditions = {c["type"]: c["status"] for c in live["status"]["conditions"]}
        assert conditions["Established"] == "True"
    status = helm.run("status", RELEASE, "--namespace", RELEASE_NAMESPACE, "-o", "json").stdout
    assert yaml.safe_load(status)["info"]["status"] == "deployed"


@pytest.mark.asyncio
async def test_walkthrough_as_the_charts_service_account(
    release: list[Obj], admin: KubeClient, testbed: Testbed, tmp_path: Path
) -> None:
    """Items 1 to 6 with the chart's RBAC, configuration and leader-election Role."""
    config_map = await admin.get(api_path("v1", "configmaps", NAMESPACE, "dra-quota-reconciler-config"))
    config = tmp_path / "config.yaml"
    config.write_text(config_map["data"]["config.yaml"])
    assert load_config(str(config)).wait_for_pods_ready is not None
    token = await request_token(admin, NAMESPACE, ACCOUNT)
    kubeconfig = token_kubeconfig(testbed.kubeconfig, token, USERNAME, tmp_path / "sa.kubeconfig")
    election = (
        "--leader-elect",
        "--leader-election-namespace",
        NAMESPACE,
        "--leader-election-identity",
        "e2e",
    )
    controller = ControllerProcess(config, kubeconfig, tmp_path / "controller.log", *election)
    controller.start()
    try:
        await walkthrough_items_1_to_6(admin)
        lease = await admin.get(
            api_path("coordination.k8s.io/v1", "leases", NAMESPACE, "dra-quota-reconciler")
        )
        assert lease["spec"]["holderIdentity"] == "e2e"
    except BaseException:
        print(controller.log_tail(60))
        raise
    finally:
        await cleanup_walkthrough(admin)
        code = controller.stop()
    log = controller.log_path.read_text()
    assert code == 0, controller.log_tail(30)
    assert "forbidden" not in log.lower(), [line for line in log.splitlines() if "orbidden" in line][:5]


@pytest.mark.asyncio
async def test_upgrade_with_a_new_configuration_rolls_the_pods(
    release: list[Obj], helm: Helm, admin: KubeClient, tmp_path: Path
) -> None:
    deployment_path = api_path("apps/v1", "deployments", NAMESPACE, "dra-quota-reconciler")
    before = (await admin.get(deployment_path))["spec"]["template"]["metadata"]["annotations"]
    config = (ROOT / "manifests" / "config" / "configuration.yaml").read_text()
    (tmp_path / "config.yaml").write_text(config.replace("timeout: 5m", "timeout: 7m"))
    helm.run(
        "upgrade",
        RELEASE,
        str(helm.chart),
        "--namespace",
        RELEASE_NAMESPACE,
        "--reuse-values",
        "--set-file",
        f"configuration={tmp_path / 'config.yaml'}",
        "--timeout",
        "120s",
    )
    config_map = await admin.get(api_path("v1", "configmaps", NAMESPACE, "dra-quota-reconciler-config"))
    assert "timeout: 7m" in config_map["data"]["config.yaml"]
    after = (await admin.get(deployment_path))["spec"]["template"]["metadata"]["annotations"]
    assert after["checksum/config"] != before["checksum/config"]
    history = yaml.safe_load(
        helm.run("history", RELEASE, "--namespace", RELEASE_NAMESPACE, "-o", "json").stdout
    )
    assert [h["status"] for h in history] == ["superseded", "deployed"]


@pytest.mark.asyncio
async def test_uninstall_keeps_only_the_crds(
    release: list[Obj], helm: Helm, admin: KubeClient, testbed: Testbed
) -> None:
    """Last in this module: it removes the release the tests above use."""
    helm.run("uninstall", RELEASE, "--namespace", RELEASE_NAMESPACE, "--timeout", "120s")
    await _namespace_gone(testbed)
    cluster_role = api_path("rbac.authorization.k8s.io/v1", "clusterroles", name="dra-quota-reconciler")
    assert await admin.get_or_none(cluster_role) is None
    for crd in _chart_crds(helm):
        assert await admin.get_or_none(f"{CRDS}/{crd['metadata']['name']}") is not None
