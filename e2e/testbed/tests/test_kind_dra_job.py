"""The walkthrough's DRA Job on kind: real kubelet, real containerd with CDI, the fake
driver's kubelet plugin as a DaemonSet (``e2e/kind/run.sh`` sets it all up).

Not run in CI (no Docker there). Without ``E2E_TARGET=kind`` and
``E2E_KUBECONFIG`` the test fails with a message saying so; it never skips.
"""

from __future__ import annotations

import pytest

from e2e.testbed import KubeClient, api_path
from e2e.testbed.clusters import Cluster
from e2e.testbed.kubeclient import Obj
from e2e.testbed.names import DRIVER_NAME
from e2e.testbed.scenario import (
    claim_name_of,
    gpu_job,
    job_condition_true,
    single_gpu_claim_template,
    single_job_pod,
    wait_for,
)

pytestmark = [pytest.mark.kind, pytest.mark.timeout(600)]
RESOURCE = "resource.k8s.io/v1"
T4_LABEL = "nvidia.com/gpu.product=Tesla-T4"
# busybox exists without a GPU; the CDI spec of the claim injects the variables.
CHECK_ENV = (
    "env | sort; "
    'test -n "$NVIDIA_VISIBLE_DEVICES" || { echo "no NVIDIA_VISIBLE_DEVICES: no CDI injection"; exit 1; }; '
    'test "$NVIDIA_VISIBLE_DEVICES" = "$GPU_DEVICE_0_UUID" || { echo "uuid mismatch"; exit 1; }; '
    "sleep 5"
)


async def _allocated_claim(kube: KubeClient, namespace: str) -> Obj | None:
    pod = await single_job_pod(kube, namespace, "job-a")
    name = claim_name_of(pod) if pod is not None else None
    if name is None:
        return None
    claim = await kube.get_or_none(api_path(RESOURCE, "resourceclaims", namespace, name))
    if claim is None or not (claim.get("status") or {}).get("allocation"):
        return None
    return claim


async def _complete_or_failed(kube: KubeClient, namespace: str) -> Obj | None:
    job = await kube.get(api_path("batch/v1", "jobs", namespace, "job-a"))
    done = job_condition_true(job, "Complete") or job_condition_true(job, "Failed")
    return job if done else None


@pytest.mark.asyncio
async def test_walkthrough_job_runs_on_kind_with_the_cdi_injected_gpu(
    cluster: Cluster, kube: KubeClient, namespace: str
) -> None:
    assert cluster.target == "kind"
    t4_nodes, _ = await kube.list_all(api_path("v1", "nodes"), {"labelSelector": T4_LABEL})
    assert t4_nodes, f"no node labelled {T4_LABEL} in the kind cluster"
    t4_names = {n["metadata"]["name"] for n in t4_nodes}

    await kube.create(
        api_path(RESOURCE, "resourceclaimtemplates", namespace), single_gpu_claim_template(namespace)
    )
    job = gpu_job("job-a", namespace, image="busybox:1.36", command=["sh", "-c", CHECK_ENV])
    await kube.create(api_path("batch/v1", "jobs", namespace), job)

    # The generated claim goes away when the pod is done: catch its allocation first.
    claim = await wait_for(
        "job-a's claim to be allocated", lambda: _allocated_claim(kube, namespace), within=180
    )
    result = claim["status"]["allocation"]["devices"]["results"][0]
    assert result["driver"] == DRIVER_NAME
    assert result["pool"] in t4_names, f"allocated from pool {result['pool']}, not a Tesla-T4 node {t4_names}"

    finished = await wait_for("job-a to finish", lambda: _complete_or_failed(kube, namespace), within=300)
    pod = await single_job_pod(kube, namespace, "job-a")
    assert pod is not None
    meta = pod["metadata"]
    logs = (await kube.get(api_path("v1", "pods", meta["namespace"], meta["name"], "log"))).get("raw", "")
    assert job_condition_true(finished, "Complete"), f"job-a failed; pod log:\n{logs}"
    assert pod["spec"]["nodeName"] == result["pool"]

    # The uuid the container saw is the one the node's ResourceSlice advertises.
    slices, _ = await kube.list_all(
        api_path(RESOURCE, "resourceslices"), {"fieldSelector": f"spec.nodeName={result['pool']}"}
    )
    devices = [
        d for s in slices if s["spec"]["driver"] == DRIVER_NAME for d in s["spec"].get("devices") or []
    ]
    uuid = next(d["attributes"]["uuid"]["string"] for d in devices if d["name"] == result["device"])
    assert f"NVIDIA_VISIBLE_DEVICES={uuid}" in str(logs), f"pod log:\n{logs}"
