"""What tests run on the test-bed and how they wait for it: the single-GPU claim, GPU Jobs,
polling the API, reading pods, Jobs and conditions.

The single-GPU ResourceClaim(Template) is written here only: every test, test
helper and scenario that needs one GPU of the fake driver builds it with
:func:`single_gpu_claim_spec` or :func:`single_gpu_claim_template`.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from e2e.testbed.kubeclient import ApiError, KubeClient, Obj, api_path
from e2e.testbed.names import DEVICE_CLASS_NAME, RUN_SECONDS_ANNOTATION

RESOURCE_V1 = "resource.k8s.io/v1"
T = TypeVar("T")


def single_gpu_claim_spec() -> Obj:
    """The spec of a ResourceClaim asking for exactly one device of the fake driver's
    DeviceClass ``gpu.nvidia.com`` (request ``gpu``)."""
    return {
        "devices": {
            "requests": [
                {
                    "name": "gpu",
                    "exactly": {
                        "deviceClassName": DEVICE_CLASS_NAME,
                        "allocationMode": "ExactCount",
                        "count": 1,
                    },
                }
            ]
        }
    }


def single_gpu_claim_template(namespace: str) -> Obj:
    """The walkthrough's ResourceClaimTemplate ``single-gpu``: a claim of one GPU per pod."""
    return {
        "apiVersion": RESOURCE_V1,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "single-gpu", "namespace": namespace},
        "spec": {"spec": single_gpu_claim_spec()},
    }


def gpu_job(
    name: str,
    namespace: str,
    *,
    run_seconds: float | str | None = None,
    annotations: dict[str, str] | None = None,
    suspend: bool = False,
    image: str = "nvcr.io/nvidia/cuda:12.6.0-base-ubuntu24.04",
    command: list[str] | None = None,
) -> Obj:
    """A plain Job shaped like the walkthrough's, using claim template ``single-gpu``.

    ``image``/``command``: what a real kubelet runs (kind); the simulator ignores them.
    """
    pod_annotations = dict(annotations or {})
    if run_seconds is not None:
        pod_annotations[RUN_SECONDS_ANNOTATION] = str(run_seconds)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "suspend": suspend,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": pod_annotations},
                "spec": {
                    "resourceClaims": [{"name": "gpu-claim", "resourceClaimTemplateName": "single-gpu"}],
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "cuda-test",
                            "image": image,
                            "command": command or ["bash", "-c", "nvidia-smi -L && sleep 3600"],
                            "resources": {"claims": [{"name": "gpu-claim"}]},
                        }
                    ],
                },
            },
        },
    }


async def wait_for(
    what: str, probe: Callable[[], Awaitable[T | None]], within: float = 60.0, interval: float = 0.2
) -> T:
    """Poll ``probe`` until it returns something other than None/False."""
    deadline = time.monotonic() + within
    last_error: Exception | None = None
    while True:
        try:
            result = await probe()
            if result is not None and result is not False:
                return result
        except (ApiError, OSError, TimeoutError) as err:
            last_error = err
        if time.monotonic() > deadline:
            suffix = f" (last error: {last_error})" if last_error else ""
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what}{suffix}")
        await asyncio.sleep(interval)


async def job_pods(kube: KubeClient, namespace: str, job: str) -> list[Obj]:
    pods, _ = await kube.list_all(api_path("v1", "pods", namespace), {"labelSelector": f"job-name={job}"})
    return pods


async def single_job_pod(kube: KubeClient, namespace: str, job: str) -> Obj | None:
    pods = await job_pods(kube, namespace, job)
    return pods[0] if len(pods) == 1 else None


def pod_phase(pod: Obj) -> str:
    return str(pod.get("status", {}).get("phase", ""))


def status_condition(obj: Obj, kind: str) -> Obj:
    """The condition of that type in ``status.conditions`` (an empty dict when absent)."""
    return pod_condition(obj, kind) or {}


def pod_condition(pod: Obj, kind: str) -> dict[str, Any] | None:
    for cond in pod.get("status", {}).get("conditions") or []:
        if cond.get("type") == kind:
            found: dict[str, Any] = copy.deepcopy(cond)
            return found
    return None


def claim_name_of(pod: Obj, claim: str = "gpu-claim") -> str | None:
    for status in pod.get("status", {}).get("resourceClaimStatuses") or []:
        if status.get("name") == claim:
            name = status.get("resourceClaimName")
            return str(name) if name else None
    return None


def job_condition_true(job: Obj, kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in job.get("status", {}).get("conditions") or []
    )
