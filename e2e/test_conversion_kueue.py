"""This controller's v1beta1 <-> v1beta2 conversion against Kueue v0.18.1's own: the same
ConversionReviews sent to Kueue's manager (built by e2e/setup.sh --kueue, run out of cluster on a
test-bed of this module's own, its webhook server on loopback) and to ``reconciler.conversion``
give the same objects, for each kind Kueue converts (ClusterQueue, Cohort, LocalQueue, Workload)
both ways: the realistic samples of tests/support/conversion_samples.py and variants with the
fields only one version has (v1beta1 admissionChecks and deprecated fungibility values, pending
workloads status, LocalQueue flavors; v1beta2 concurrentAdmissionPolicy, preemption gates, a pod
PriorityClass reference, topology assignments with no and with many domains).

Compared after one normalization: Kueue's Go types write quantities given as integers back as
strings (``8`` -> ``"8"``) and add empty fields; both are ignored.
"""

from __future__ import annotations

import asyncio
import copy
import json
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from e2e.conformance.kueue import KueueProcess, kueue_build
from e2e.support.deploy import ROOT, apply_objects
from e2e.testbed import KubeClient, Testbed
from reconciler.conversion import HUB, SPOKE, convert
from tests.support.conversion_samples import objects

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]
QUANTITIES = ("nominalQuota", "borrowingLimit", "lendingLimit")
KEPT_EMPTY = ("levels", "domains", "slices")


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    with Testbed(run_dir=tmp_path_factory.mktemp("testbed-kueue-conversion"), echo=None) as testbed:
        yield testbed


@pytest.fixture(scope="module")
def kueue(bed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KueueProcess]:
    build = kueue_build()
    missing = build.missing()
    if missing:
        raise RuntimeError(f"Kueue is not built ({missing[0]}): run e2e/setup.sh --kueue")
    base = yaml.safe_load((ROOT / "e2e/conformance/manifests/configuration.yaml").read_text())
    process = KueueProcess(build, bed.kubeconfig, tmp_path_factory.mktemp("kueue-conversion"), base)

    async def install() -> None:
        async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
            await apply_objects(
                kube, [yaml.safe_load(p.read_text()) for p in sorted(build.crds.glob("*.yaml"))]
            )
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}
            await apply_objects(kube, [namespace])

    asyncio.run(install())
    process.start(bed.pki.serving_cert, bed.pki.serving_key)
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest_asyncio.fixture
async def kueue_convert(kueue: KueueProcess, bed: Testbed) -> AsyncIterator[Any]:
    context = ssl.create_default_context(cafile=str(bed.pki.ca_cert))
    url = f"https://127.0.0.1:{kueue.webhook_port}/convert"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session:

        async def call(obj: Obj, desired: str) -> Obj:
            request = {"uid": "u1", "desiredAPIVersion": desired, "objects": [obj]}
            review = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview", "request": request}
            async with session.post(url, json=review) as resp:
                answer = json.loads(await resp.text())  # Kueue answers with text/plain
            assert answer["response"]["result"]["status"] == "Success", answer["response"]["result"]
            converted: Obj = answer["response"]["convertedObjects"][0]
            return converted

        yield call


def _normal(value: Any, key: str = "") -> Any:
    if key in QUANTITIES:
        return str(value)
    if isinstance(value, dict):
        return {k: _normal(v, k) for k, v in value.items() if v not in (None, {}, []) or k in KEPT_EMPTY}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _compared(obj: Obj) -> Obj:
    """``obj`` normalized, without the creationTimestamp Kueue's types write as null."""
    normal: Obj = _normal(obj)
    normal["metadata"].pop("creationTimestamp", None)
    return normal


def _variants(version: str, kind: str) -> list[Obj]:
    """The sample of ``kind`` in ``version`` and its variants with one version's own fields."""
    sample = objects(version)[kind]
    found = [sample]
    variant = copy.deepcopy(sample)
    if (version, kind) == ("v1beta1", "ClusterQueue"):
        del variant["spec"]["admissionChecksStrategy"]
        variant["spec"]["admissionChecks"] = ["prov", "multikueue"]
        variant["spec"]["flavorFungibility"] = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}
        variant["status"]["pendingWorkloadsStatus"] = {"lastChangeTime": "2026-12-07T10:00:00Z"}
    elif (version, kind) == ("v1beta2", "ClusterQueue"):
        variant["spec"]["concurrentAdmissionPolicy"] = {"migration": {"mode": "Off"}}
    elif (version, kind) == ("v1beta1", "LocalQueue"):
        variant["status"]["flavors"] = [{"name": "a100", "resources": ["nvidia.com/gpu"]}]
    elif (version, kind) == ("v1beta1", "Workload"):
        variant["spec"]["priorityClassSource"] = "scheduling.k8s.io/priorityclass"
        domains = [{"values": ["block-1", f"rack-{i}"], "count": i % 3 + 1} for i in range(5)]
        variant["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["domains"] = domains
        none = copy.deepcopy(sample)
        none["spec"]["priorityClassSource"] = ""
        none["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["domains"] = []
        found.append(none)
    elif (version, kind) == ("v1beta2", "Workload"):
        variant["spec"]["preemptionGates"] = [{"name": "gate"}]
        variant["spec"]["priorityClassRef"] = {
            "group": "scheduling.k8s.io",
            "kind": "PriorityClass",
            "name": "p",
        }
    else:
        return found
    return [*found, variant]


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", ["ClusterQueue", "Cohort", "LocalQueue", "Workload"])
@pytest.mark.parametrize(("version", "desired"), [("v1beta1", HUB), ("v1beta2", SPOKE)])
async def test_the_conversion_is_kueues(kueue_convert: Any, kind: str, version: str, desired: str) -> None:
    for obj in _variants(version, kind):
        obj["metadata"]["uid"] = "0b7a2f1e-5c3d-4e6f-8a9b-0c1d2e3f4a5b"
        assert _compared(convert(obj, desired)) == _compared(await kueue_convert(obj, desired))
