"""Kueue's objects in v1beta1 through the real kube-apiserver: the shipped CRDs serve v1beta1 beside
v1beta2 (stored) and call this controller's conversion webhook (``/convert``), registered here by
``url`` on loopback with the CA of a certificate made here (the shipped CRDs name the webhook
Service, which a test-bed does not route), as are the shipped admission webhooks of Kueue's
objects (registered for v1beta2: the API server converts a v1beta1 request before calling them).

Checked: a ResourceFlavor, ClusterQueue (``spec.cohort``), LocalQueue, WorkloadPriorityClass and
Workload (``priorityClassName`` with its source) applied as v1beta1 are stored as v1beta2 with
Kueue's names (``cohortName``, ``priorityClassRef``), the ClusterQueue with the in-use finalizer
the mutating webhook adds; the controller, which reads v1beta2 only, admits the Workload; read back
as v1beta1, the Workload shows its admission and its priority class under v1beta1's names and the
LocalQueue its usage as ``flavorUsage``; a list in v1beta1 converts every item; the v1beta1
schema's own rule refuses a borrowing limit without a cohort. Its own test-bed: the conversion
webhook is registered on the CRDs, which are cluster-wide.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.support.deploy import FIELD_MANAGER
from e2e.support.served import Served, own_bed, start_controller, stop_controller
from e2e.support.webhooks import conversion_on_loopback, on_loopback, register, shipped_configurations
from e2e.support.workloads import is_true
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.clusters import Cluster
from e2e.testbed.kubeclient import ApiError
from e2e.testbed.scenario import wait_for
from e2e.testbed.spec import NodeSpec, TestbedSpec
from reconciler.webhook.certmanager import CONVERSION_CRDS

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]
V1BETA1, V1BETA2 = "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"
SPEC = TestbedSpec(nodes=[NodeSpec(name="node-1")])


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_bed(tmp_path_factory, "conversion", SPEC)


@pytest.fixture
def cluster(bed: Testbed) -> Cluster:
    """This module's test-bed (the `kube` and `namespace` fixtures use it)."""
    return Cluster(kubeconfig=bed.kubeconfig, target="testbed", testbed=bed)


@pytest.fixture(scope="module")
def controller(bed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`reconciler run` with its webhooks on loopback: the CRDs' conversion and the admission
    webhooks of Kueue's objects pointed at it."""
    served = start_controller(bed.kubeconfig, tmp_path_factory.mktemp("controller-conversion"), ["batch/job"])
    kueue_hooks = [
        {**c, "webhooks": [w for w in c["webhooks"] if w["rules"][0]["apiGroups"] == ["kueue.x-k8s.io"]]}
        for c in shipped_configurations()
    ]

    async def point_at_loopback() -> None:
        async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
            assert served.ca_pem is not None
            await conversion_on_loopback(kube, CONVERSION_CRDS, served.port, served.ca_pem)
            await register(kube, on_loopback(kueue_hooks, served.port, served.ca_pem))

    asyncio.run(point_at_loopback())
    yield served
    stop_controller(served)


def _objects(namespace: str) -> list[Obj]:
    """v1beta1 objects as a manifest written for Kueue carries them."""
    flavor, cq = f"cpu-{namespace}", f"cq-{namespace}"
    quota = {"name": flavor, "resources": [{"name": "cpu", "nominalQuota": "4"}]}
    return [
        {"kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": {}},
        {"kind": "WorkloadPriorityClass", "metadata": {"name": f"high-{namespace}"}, "value": 1000},
        {
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "cohort": f"research-{namespace}",
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [quota]}],
            },
        },
        {
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
        {
            "kind": "Workload",
            "metadata": {"name": "train", "namespace": namespace},
            "spec": {
                "queueName": "lq",
                "priorityClassName": f"high-{namespace}",
                "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
                "priority": 1000,
                "podSets": [
                    {
                        "name": "main",
                        "count": 2,
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [
                                    {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                                ],
                            }
                        },
                    }
                ],
            },
        },
    ]


PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "Workload": "workloads",
}


def _path(version: str, obj: Obj) -> str:
    meta = obj["metadata"]
    return api_path(version, PLURALS[obj["kind"]], meta.get("namespace"), meta["name"])


@pytest.mark.asyncio
async def test_v1beta1_objects_are_stored_as_v1beta2_admitted_and_read_back_in_both(
    controller: Served, kube: KubeClient, namespace: str
) -> None:
    objects = _objects(namespace)
    for obj in objects:
        await kube.apply(_path(V1BETA1, obj), {"apiVersion": V1BETA1, **obj}, FIELD_MANAGER)
    _, priority, cq, lq, workload = objects
    stored = await kube.get(_path(V1BETA2, cq))
    assert stored["apiVersion"] == V1BETA2
    assert stored["spec"]["cohortName"] == f"research-{namespace}"
    assert "cohort" not in stored["spec"]
    assert stored["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]  # the mutating webhook
    assert (await kube.get(_path(V1BETA1, cq)))["spec"]["cohort"] == f"research-{namespace}"

    async def admitted() -> Obj | None:
        found = await kube.get(_path(V1BETA2, workload))
        return found if is_true(found, "Admitted") else None

    wl = await wait_for("the v1beta1 Workload to be admitted", admitted, within=60)
    assert wl["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": priority["metadata"]["name"],
    }
    old = await kube.get(_path(V1BETA1, workload))
    assert old["apiVersion"] == V1BETA1
    assert old["spec"]["priorityClassName"] == priority["metadata"]["name"]
    assert old["spec"]["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass"
    assert "priorityClassRef" not in old["spec"]
    assert old["status"]["admission"]["clusterQueue"] == cq["metadata"]["name"]
    assert is_true(old, "Admitted")

    async def usage() -> list[Obj] | None:
        status = (await kube.get(_path(V1BETA1, lq))).get("status") or {}
        return status.get("flavorUsage") or None

    used = await wait_for("the LocalQueue's usage in v1beta1", usage, within=30)
    assert used[0]["resources"][0] == {"name": "cpu", "total": "2"}
    listed = await kube.get(api_path(V1BETA1, "workloads", namespace))
    assert [w["spec"]["priorityClassName"] for w in listed["items"]] == [priority["metadata"]["name"]]


@pytest.mark.asyncio
async def test_the_v1beta1_schema_refuses_a_borrowing_limit_without_a_cohort(
    controller: Served, kube: KubeClient, namespace: str
) -> None:
    quota = {"name": "any", "resources": [{"name": "cpu", "nominalQuota": "4", "borrowingLimit": "1"}]}
    cq = {
        "apiVersion": V1BETA1,
        "kind": "ClusterQueue",
        "metadata": {"name": f"lonely-{namespace}"},
        "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [quota]}]},
    }
    with pytest.raises(ApiError) as refused:
        await kube.create(api_path(V1BETA1, "clusterqueues"), cq)
    assert refused.value.status == 422
    assert "borrowingLimit must be nil when cohort is empty" in str(refused.value)
