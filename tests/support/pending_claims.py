"""A pending pod of a Job (with or without its claim) and an unallocated ResourceClaim."""

from __future__ import annotations

from reconciler.api import Pod, ResourceClaim
from tests.support.builders import job_pod_metadata, unschedulable
from tests.support.reconciler_harness import decode

UNSCHEDULABLE = "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable"


def pending_pod(job_name: str, *, claim: str | None, message: str = UNSCHEDULABLE) -> Pod:
    body = {
        "metadata": job_pod_metadata(job_name),
        "spec": {},
        "status": {
            "phase": "Pending",
            "conditions": [unschedulable(message)],
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
