"""Prebuilt Workloads: a job that names an existing Workload runs under it instead of getting
one of its own (Kueue's prebuilt-workload path in jobframework), for every registered kind.

This is how a MultiKueue worker runs what a manager dispatches: the manager creates the
Workload on the worker (ownerless, labelled `kueue.x-k8s.io/multikueue-origin`), then a copy of
the job naming it in `kueue.x-k8s.io/prebuilt-workload-name`. As Kueue v0.18.1 reads that name
(its feature WorkloadIdentifierAnnotations, on by default) the annotation comes first, then the
label. The job then:

- waits, suspended, while that Workload does not exist (or is controlled by another object);
- adopts it: becomes its controller owner and puts its UID in the Workload's job-uid label;
- finishes it (reason OutOfSync) when the job no longer matches it, where a Workload of its
  own would be replaced.

A Workload with the MultiKueue origin label starts its pods with the label
`kueue.x-k8s.io/multikueue-worker-workload-pod: "true"`, as Kueue's worker does.
Everything here is pure: objects in, patches and facts out.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from reconciler.api import Workload
from reconciler.api.meta import ObjectMeta
from reconciler.core.model.workloads import JOB_UID_LABEL

__all__ = [
    "MISSING_WORKLOAD",
    "MULTIKUEUE_ORIGIN_LABEL",
    "MULTIKUEUE_WORKER_POD_LABEL",
    "OUT_OF_SYNC_MESSAGE",
    "OUT_OF_SYNC_REASON",
    "PREBUILT_WORKLOAD_KEY",
    "adoption_patch",
    "controlled_elsewhere",
    "multikueue_origin",
    "prebuilt_name",
    "worker_pod_labels",
]

# One key, read from the annotations first and then from the labels.
PREBUILT_WORKLOAD_KEY = "kueue.x-k8s.io/prebuilt-workload-name"
MULTIKUEUE_ORIGIN_LABEL = "kueue.x-k8s.io/multikueue-origin"
MULTIKUEUE_WORKER_POD_LABEL = "kueue.x-k8s.io/multikueue-worker-workload-pod"
OUT_OF_SYNC_REASON = "OutOfSync"
OUT_OF_SYNC_MESSAGE = "The prebuilt workload is out of sync with its user job"
# The Stopped Event's message on a job whose prebuilt Workload is missing.
MISSING_WORKLOAD = "missing workload"

_WORKER_POD_LABELS: Mapping[str, str] = {MULTIKUEUE_WORKER_POD_LABEL: "true"}
_NONE: Mapping[str, str] = {}
# Kubernetes' label value rule (what Kueue checks before putting a UID in a label).
_LABEL_VALUE_MAX = 63


def prebuilt_name(meta: ObjectMeta) -> str:
    """The Workload a job names as its prebuilt one ("" for none): annotation, then label."""
    return meta.annotations.get(PREBUILT_WORKLOAD_KEY) or meta.labels.get(PREBUILT_WORKLOAD_KEY, "")


def multikueue_origin(workload: Workload) -> str | None:
    """The MultiKueue manager that created this Workload (None: not created by a manager)."""
    return workload.metadata.labels.get(MULTIKUEUE_ORIGIN_LABEL)


def worker_pod_labels(workload: Workload) -> Mapping[str, str]:
    """What starting adds to every pod set's labels for this Workload (a manager's: the worker
    pod label)."""
    return _WORKER_POD_LABELS if MULTIKUEUE_ORIGIN_LABEL in workload.metadata.labels else _NONE


def controlled_elsewhere(workload: Workload, job: ObjectMeta) -> bool:
    """Whether another object controls the Workload (the job then has none, as in Kueue)."""
    for ref in workload.metadata.owner_references:
        if ref.controller:
            return ref.uid != job.uid
    return False


def adoption_patch(workload: Workload, job: ObjectMeta, api_version: str, kind: str) -> bytes | None:
    """The merge patch that makes the job the Workload's controller owner (with its UID in the
    job-uid label), or None when it already is. It carries the resourceVersion: a conflict is
    retried on the next event."""
    meta = workload.metadata
    if any(ref.controller and ref.uid == job.uid for ref in meta.owner_references):
        return None
    owners: list[object] = msgspec.to_builtins(meta.owner_references)
    owners.append(
        {
            "apiVersion": api_version,
            "kind": kind,
            "name": job.name,
            "uid": job.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    )
    patch: dict[str, object] = {"ownerReferences": owners, "resourceVersion": meta.resource_version}
    if job.uid and len(job.uid) <= _LABEL_VALUE_MAX:
        patch["labels"] = {JOB_UID_LABEL: job.uid}
    return msgspec.json.encode({"metadata": patch})
