"""`reconciler explain` under hierarchical cohorts on the test-bed: Cohort objects are read from the
real API server (the project's CRD) and their quota counts, as it does for the controller.

No controller runs here: explain judges the Workload from the objects alone. A ClusterQueue
without GPUs of its own sits in cohort `team`, a child of `org`, which holds one GPU; a
Workload asking for one GPU fits by borrowing it. Once `org` is deleted it waits.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from e2e.support.deploy import ROOT, install_crds
from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import ApiError

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(180)]

KUEUE = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
FIELD_MANAGER = "e2e-explain-cohorts"
PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "Cohort": "cohorts",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "Workload": "workloads",
}


def object_path(doc: dict[str, Any]) -> str:
    meta = doc["metadata"]
    return api_path(KUEUE, PLURALS[doc["kind"]], meta.get("namespace"), meta["name"])


def _quota(flavor: str, gpus: int) -> list[dict[str, Any]]:
    resources = [{"name": GPU, "nominalQuota": gpus}]
    return [{"coveredResources": [GPU], "flavors": [{"name": flavor, "resources": resources}]}]


def objects(suffix: str, namespace: str) -> list[dict[str, Any]]:
    flavor, org, team, cq = (f"{n}-{suffix}" for n in ("t4", "org", "team", "cq"))
    container = {"name": "main", "image": "busybox", "resources": {"requests": {GPU: "1"}}}
    return [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": flavor}, "spec": {}},
        {
            "apiVersion": KUEUE,
            "kind": "Cohort",
            "metadata": {"name": org},
            "spec": {"resourceGroups": _quota(flavor, 1)},
        },
        {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": team}, "spec": {"parentName": org}},
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {"namespaceSelector": {}, "cohortName": team, "resourceGroups": _quota(flavor, 0)},
        },
        {
            "apiVersion": KUEUE,
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": namespace},
            "spec": {"clusterQueue": cq},
        },
        {
            "apiVersion": KUEUE,
            "kind": "Workload",
            "metadata": {"name": "wants-a-gpu", "namespace": namespace},
            "spec": {
                "queueName": "lq",
                "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
            },
        },
    ]


@pytest_asyncio.fixture
async def applied(kube: KubeClient, namespace: str) -> AsyncIterator[list[dict[str, Any]]]:
    await install_crds(kube)
    docs = objects(uuid.uuid4().hex[:6], namespace)
    for doc in docs:
        await kube.apply(object_path(doc), doc, FIELD_MANAGER)
    yield docs
    for doc in reversed(docs):
        if not doc["metadata"].get("namespace"):  # the namespace's own go with it
            try:
                await kube.delete(object_path(doc))
            except ApiError as err:
                if err.status != 404:
                    raise


async def cli(kubeconfig: str, *args: str) -> str:
    """`reconciler ARGS --kubeconfig KUBECONFIG`; its output (it must succeed)."""
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "reconciler.cli", *args, "--kubeconfig", kubeconfig],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def explain(kubeconfig: str, namespace: str) -> str:
    return await cli(kubeconfig, "explain", "workload", f"{namespace}/wants-a-gpu")


@pytest.mark.asyncio
async def test_a_workload_fits_by_borrowing_from_a_parent_cohorts_quota(
    kube: KubeClient, namespace: str, applied: list[dict[str, Any]], cluster: Any
) -> None:
    kubeconfig = str(cluster.kubeconfig)
    cq = next(d for d in applied if d["kind"] == "ClusterQueue")["metadata"]["name"]
    text = await explain(kubeconfig, namespace)
    assert text.startswith(
        f"Workload {namespace}/wants-a-gpu is PENDING: it fits now in ClusterQueue {cq}"
    ), text
    assert "could not read" not in text
    org = next(d for d in applied if d["kind"] == "Cohort" and "parentName" not in d["spec"])
    await kube.delete(object_path(org))
    text = await explain(kubeconfig, namespace)
    assert text.startswith(f"Workload {namespace}/wants-a-gpu is PENDING: it waits"), text


@pytest.mark.asyncio
async def test_a_dry_run_reads_the_live_queues_and_puts_the_pending_workload_first(
    kube: KubeClient, namespace: str, applied: list[dict[str, Any]], cluster: Any, tmp_path: Path
) -> None:
    """`explain --what-if`: the live snapshot (Cohorts included) read from the real API server; the
    pending Workload that fits now takes the borrowed GPU before the one asked about, which waits."""
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}))
    asked = dict(next(d for d in applied if d["kind"] == "Workload"))
    asked["metadata"] = {"name": "another", "namespace": namespace}
    file = tmp_path / "what-if.yaml"
    file.write_text(json.dumps(asked))
    what_if = ["explain", "--what-if", str(file), "--config", str(config)]
    answer = json.loads(await cli(str(cluster.kubeconfig), *what_if, "-o", "json"))
    assert not [w for w in answer["warnings"] if "not read" in w], answer["warnings"]
    (verdict,) = answer["workloads"]
    assert (verdict["namespace"], verdict["workload"], verdict["admitted"]) == (namespace, "another", False)
    assert f"insufficient unused quota for {GPU}" in verdict["waiting"], verdict
    # The Workload asked about by itself, once the pending one is gone: admitted by borrowing.
    await kube.delete(api_path(KUEUE, "workloads", namespace, "wants-a-gpu"))
    text = await cli(str(cluster.kubeconfig), *what_if)
    cq = next(d for d in applied if d["kind"] == "ClusterQueue")["metadata"]["name"]
    assert f"Workload {namespace}/another:\n  would be admitted now to ClusterQueue {cq}" in text, text
