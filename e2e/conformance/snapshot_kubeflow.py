"""The part of a checkpoint for scenarios with Kubeflow's frameworks (their operators running).

On top of snapshot.py's state (unchanged, so the other recordings keep their inputs hash; an
MPIJob's launcher is a batch/v1 Job, so it is there already): each PyTorchJob's and MPIJob's
`spec.runPolicy.suspend` and, per replica type, the node selector and tolerations its pod
template carries (what admission injected), and the Events Kueue writes on such a job
(CreatedWorkload, Started, Suspended, Stopped, ...; not the operators' own).
"""

from __future__ import annotations

from typing import Any

from e2e.conformance.snapshot import take_snapshot
from e2e.testbed import KubeClient, api_path

Obj = dict[str, Any]
KINDS = (
    ("kubeflow.org/v1", "pytorchjobs", "pytorchReplicaSpecs"),
    ("kubeflow.org/v2beta1", "mpijobs", "mpiReplicaSpecs"),
)
# The reasons of the Events Kueue (and the controller) write on a job.
JOB_EVENT_REASONS = frozenset(
    {
        "CreatedWorkload",
        "Started",
        "Suspended",
        "Stopped",
        "FinishedWorkload",
        "UpdatedWorkload",
        "DeletedWorkload",
    }
)


def _job(job: Obj, field: str) -> dict[str, Any]:
    spec = job.get("spec") or {}
    out: dict[str, Any] = {"suspend": (spec.get("runPolicy") or {}).get("suspend", False)}
    for replica_type, replica in sorted((spec.get(field) or {}).items()):
        pod = (replica.get("template") or {}).get("spec") or {}
        out[f"{replica_type}.nodeSelector"] = pod.get("nodeSelector") or {}
        out[f"{replica_type}.tolerations"] = pod.get("tolerations") or []
    return out


async def take_kubeflow_snapshot(kube: KubeClient, namespaces: tuple[str, ...]) -> dict[str, Any]:
    """snapshot.py's state with the Kubeflow jobs and Kueue's Events on them."""
    flat = await take_snapshot(kube, namespaces)
    events: set[str] = set()
    for ns in namespaces:
        for api_version, plural, field in KINDS:
            for job in (await kube.get(api_path(api_version, plural, ns)))["items"]:
                name = f"{job['kind']}[{ns}/{job['metadata']['name']}]"
                flat.update({f"{name}.{k}": v for k, v in _job(job, field).items()})
        for ev in (await kube.get(api_path("v1", "events", ns)))["items"]:
            involved = ev.get("involvedObject") or {}
            if involved.get("kind") in ("PyTorchJob", "MPIJob") and ev.get("reason") in JOB_EVENT_REASONS:
                events.add(
                    f"{involved['kind']}[{involved.get('name', '')}] {ev.get('type')} {ev.get('reason')}"
                )
    flat["Events"] = sorted({*flat.get("Events", []), *events})
    return flat
