"""A pending pod of a Job (with or without its claim) and an unallocated ResourceClaim."""

from __future__ import annotations

from reconciler.api import Pod, ResourceClaim
from tests.support.reconciler_harness import decode

UNSCHEDULABLE = "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable"


def pending_pod(job_name: str, *, claim: str | None, message: str = UNSCHEDULABLE) -> Pod:
    body = {
        "metadata": {
            "name": f"{job_name}-1",
            "namespace": "ns",
            "labels": {"kueue.x-k8s.io/podset": "main"},
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": job_name, "controller": True}
            ],
        },
        "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": message,
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
            "resourceClaimStatuses": [{"name": "g", "resourceClaimName": claim}] if claim else [],
        },
    }
    pod: Pod = decode(body, Pod)
    return pod


def unallocated_claim(name: str, pod: str) -> ResourceClaim:
    body = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "ownerReferences": [{"kind": "Pod", "name": pod, "uid": "p"}],
        },
        "spec": {"devices": {"requests": []}},
    }
    claim: ResourceClaim = decode(body, ResourceClaim)
    return claim
