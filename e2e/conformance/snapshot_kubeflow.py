"""The part of a checkpoint for scenarios with Kubeflow's frameworks (their operators running).

On top of snapshot.py's state (unchanged, so the other recordings keep their inputs hash; an
MPIJob's launcher is a batch/v1 Job, so it is there already): each PyTorchJob's and MPIJob's
`spec.runPolicy.suspend` and, per replica type, the node selector, tolerations and
`kueue.x-k8s.io/` annotations its pod template carries (what the webhooks and admission
injected), with the Workload's name in `kueue.x-k8s.io/workload` (its hash made `<hash>`) as a
field of its own, `workloadAnnotation` (Kueue writes it for topology-aware scheduling, which the
controller does not do: a listed difference that must not hide the other annotations), and the
Events Kueue writes on such a job (CreatedWorkload, Started, Suspended, Stopped, ...; not the
operators' own).
"""

from __future__ import annotations

import re
from typing import Any

from e2e.conformance.snapshot import take_snapshot
from e2e.testbed import KubeClient, api_path

Obj = dict[str, Any]
KUEUE_PREFIX = "kueue.x-k8s.io/"
# Kueue names the started job's Workload on its pod templates; the name's hash differs per run.
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
_WORKLOAD_HASH = re.compile(r"-[0-9a-f]{5}$")
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
        annotations = ((replica.get("template") or {}).get("metadata") or {}).get("annotations") or {}
        out[f"{replica_type}.kueueAnnotations"] = {
            k: v for k, v in annotations.items() if k.startswith(KUEUE_PREFIX) and k != WORKLOAD_ANNOTATION
        }
        workload = annotations.get(WORKLOAD_ANNOTATION)
        out[f"{replica_type}.workloadAnnotation"] = (
            None if workload is None else _WORKLOAD_HASH.sub("-<hash>", workload)
        )
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
