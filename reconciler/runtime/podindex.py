"""The Pods and ResourceClaims of admitted Jobs, indexed by the Job that owns them.

Watch events go in; out comes which Job each change concerns, so the
reconciler re-evaluates only that Job's Workload (PodsReady, claim report).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from reconciler.api import Pod, ResourceClaim
from reconciler.core.podstatus import owner_job

__all__ = ["PodIndex"]

Key = tuple[str, str]


@dataclass
class PodIndex:
    pods: dict[Key, Pod] = field(default_factory=dict)
    claims: dict[Key, ResourceClaim] = field(default_factory=dict)
    _by_job: dict[Key, set[str]] = field(default_factory=dict)
    _pod_job: dict[Key, Key] = field(default_factory=dict)

    def on_pod(self, key: Key, pod: Pod | None) -> Key | None:
        """Record a pod (None: deleted); returns its Job's key."""
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
        name = owner_job(pod)
        if name is None:
            return job
        job = (key[0], name)
        self._pod_job[key] = job
        self._by_job.setdefault(job, set()).add(key[1])
        return job

    def on_claim(self, key: Key, claim: ResourceClaim | None) -> Key | None:
        """Record a claim (None: deleted); returns the Job of the pod that owns it."""
        if claim is None:
            gone = self.claims.pop(key, None)
            return None if gone is None else self._job_of_claim(gone)
        self.claims[key] = claim
        return self._job_of_claim(claim)

    def pods_of(self, job: Key) -> list[Pod]:
        return [self.pods[(job[0], name)] for name in sorted(self._by_job.get(job, ()))]

    def _job_of_claim(self, claim: ResourceClaim) -> Key | None:
        namespace = claim.metadata.namespace
        for ref in claim.metadata.owner_references:
            if ref.kind == "Pod":
                return self._pod_job.get((namespace, ref.name))
        return None
