"""The walkthrough (examples/walkthrough) as the live state `reconciler explain` reads.

The manifests are admitted by the core's offline simulation (as `reconciler simulate`
does), so the Workloads carry the statuses the controller writes: job A admitted to
p3-dra-cq with the T4, job B pending for quota. Tests change the state to break it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml

from reconciler.api import (
    ClusterQueue,
    DeviceClass,
    Job,
    LocalQueue,
    Namespace,
    Pod,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceFlavor,
    Workload,
)
from reconciler.explain.state import ClusterState, Target
from reconciler.simulate import InputObject, simulate
from tests.support.builders import unschedulable

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "walkthrough"
NS = "p3-dra-demo"
MAPPINGS = {"gpu.nvidia.com": "nvidia.com/gpu"}
ADMITTED_AT = "2025-01-01T00:00:06Z"
NOW = "2025-01-01T00:00:30Z"
UIDS = {"kueue-dra-running-a": "uid-a", "kueue-dra-pending-b": "uid-b"}
CREATED = {"kueue-dra-running-a": "2025-01-01T00:00:00Z", "kueue-dra-pending-b": "2025-01-01T00:00:05Z"}
PENDING_MESSAGE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
    "in flavor p3-t4, 1 more needed"
)
Obj = dict[str, Any]


def decode(body: Any, kind: type[Any]) -> Any:
    return msgspec.json.decode(msgspec.json.encode(body), type=kind)


def _documents() -> list[Obj]:
    docs: list[Obj] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    for doc in docs:
        if doc["kind"] == "Job":
            doc["metadata"]["uid"] = UIDS[doc["metadata"]["name"]]
            doc["metadata"]["creationTimestamp"] = CREATED[doc["metadata"]["name"]]
    return [d for d in docs if d["kind"] != "Configuration"]


def _of(docs: list[Obj], kind: str, typ: type[Any]) -> list[Any]:
    return [decode(d, typ) for d in docs if d["kind"] == kind]


def walkthrough_state(kind: str = "job", name: str = "kueue-dra-pending-b") -> ClusterState:
    """Job A admitted and running (1 pod ready), job B pending; target: `kind` NS/`name`."""
    docs = _documents()
    result = simulate([InputObject(f"#{i}", d) for i, d in enumerate(docs)], MAPPINGS, ADMITTED_AT)
    workloads: list[Workload] = [decode(w, Workload) for w in result.workloads]
    jobs = {j.metadata.name: j for j in _of(docs, "Job", Job)}
    running = jobs["kueue-dra-running-a"]
    running.spec.suspend = False
    running.status.active, running.status.ready = 1, 1
    target = Target.parse(kind, f"{NS}/{name}")
    job = jobs.get(name) if kind == "job" else None
    workload = next((w for w in workloads if w.metadata.name == name), None) if kind == "workload" else None
    if workload is not None:
        owner = workload.metadata.owner_references[0].name
        job = jobs[owner]
    return ClusterState(
        target=target,
        now=NOW,
        job=job,
        workload=workload,
        workloads=workloads,
        cluster_queues=_of(docs, "ClusterQueue", ClusterQueue),
        local_queues=_of(docs, "LocalQueue", LocalQueue),
        flavors=_of(docs, "ResourceFlavor", ResourceFlavor),
        namespaces=_of(docs, "Namespace", Namespace),
        templates=_of(docs, "ResourceClaimTemplate", ResourceClaimTemplate),
        device_classes=[decode({"metadata": {"name": "gpu.nvidia.com"}}, DeviceClass)],
    )


def workload_of(state: ClusterState, job_name: str) -> Workload:
    return next(w for w in state.workloads if w.metadata.name.startswith(f"job-{job_name}-"))


def unschedulable_pod(job_name: str, claim: str, message: str, since: str) -> Pod:
    """A pod of the Job that kube-scheduler could not place, its claim `claim` named in its status."""
    body = {
        "metadata": {
            "name": f"{job_name}-x7k2p",
            "namespace": NS,
            "labels": {"batch.kubernetes.io/job-name": job_name},
            "ownerReferences": [{"kind": "Job", "name": job_name, "controller": True, "uid": UIDS[job_name]}],
        },
        "spec": {"resourceClaims": [{"name": "gpu-claim", "resourceClaimTemplateName": "single-gpu"}]},
        "status": {
            "phase": "Pending",
            "conditions": [unschedulable(message, since)],
            "resourceClaimStatuses": [{"name": "gpu-claim", "resourceClaimName": claim}],
        },
    }
    result: Pod = decode(body, Pod)
    return result


def unallocated_claim(name: str) -> ResourceClaim:
    result: ResourceClaim = decode({"metadata": {"name": name, "namespace": NS}}, ResourceClaim)
    return result
