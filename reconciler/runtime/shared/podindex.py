"""The Pods and ResourceClaims of admitted jobs, indexed by the job that owns them.

A pod's job is its controller reference, when that names the kind of an enabled integration
(`kinds`, which the reconciler sets). Watch events go in; out comes
which job each change concerns, so the reconciler re-evaluates only that job's Workload
(PodsReady, claim report).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.api import Pod, ResourceClaim
from reconciler.core.primitives.podstatus import controller_of

__all__ = ["PodIndex"]

Key = tuple[str, str]
# (kind, namespace, name) of a job.
JobRef = tuple[str, str, str]


@dataclass
class PodIndex:
    kinds: frozenset[str] = frozenset()
    pods: dict[Key, Pod] = field(default_factory=dict)
    claims: dict[Key, ResourceClaim] = field(default_factory=dict)
    _by_job: dict[JobRef, set[str]] = field(default_factory=dict)
    _pod_job: dict[Key, JobRef] = field(default_factory=dict)

    def on_pod(self, key: Key, pod: Pod | None) -> Key | None:
        """Record a pod (None: deleted); returns its job's (namespace, name)."""
        ref = self.on_pod_ref(key, pod)
        return None if ref is None else (ref[1], ref[2])

    def on_pod_ref(self, key: Key, pod: Pod | None) -> JobRef | None:
        """Record a pod (None: deleted); returns its job."""
        job = self._pod_job.pop(key, None)
        if job is not None:
            names = self._by_job.get(job)
            if names is not None:
                names.discard(key[1])
                if not names:
                    del self._by_job[job]
        if pod is None:
            self.pods.pop(key, None)
            return job
        self.pods[key] = pod
        owner = controller_of(pod, self.kinds)
        if owner is None:
            return job
        job = (owner[0], key[0], owner[1])
        self._pod_job[key] = job
        self._by_job.setdefault(job, set()).add(key[1])
        return job

    def on_claim(self, key: Key, claim: ResourceClaim | None) -> Key | None:
        """Record a claim (None: deleted); returns the (namespace, name) of its pod's job."""
        ref = self.on_claim_ref(key, claim)
        return None if ref is None else (ref[1], ref[2])

    def on_claim_ref(self, key: Key, claim: ResourceClaim | None) -> JobRef | None:
        """Record a claim (None: deleted); returns the job of the pod that owns it."""
        if claim is None:
            gone = self.claims.pop(key, None)
            return None if gone is None else self._job_of_claim(gone)
        self.claims[key] = claim
        return self._job_of_claim(claim)

    def pods_of(self, job: Key, kind: str) -> list[Pod]:
        return [self.pods[(job[0], name)] for name in sorted(self._by_job.get((kind, *job), ()))]

    def _job_of_claim(self, claim: ResourceClaim) -> JobRef | None:
        namespace = claim.metadata.namespace
        for ref in claim.metadata.owner_references:
            if ref.kind == "Pod":
                return self._pod_job.get((namespace, ref.name))
        return None
