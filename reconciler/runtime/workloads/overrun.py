"""Beyond Kueue: an admitted Workload whose job runs more pods than it was charged for (a managed
parent's child edited past its charge, or given pods of its own) is evicted: its job is stopped,
its quota kept until the job no longer runs, and it is queued again after Kueue's requeue backoff
(60 s doubled at each repeat, at most an hour, in `status.requeueState`: a parent's controller may
keep the edited child, which then runs too many pods again at the next admission, so the repeats
slow down instead of looping). The job's Stopped Event and the Workload's Evicted condition name
the pod set, the counts and the children that run them.

Jobs that are pods (plain pods, pod groups: excess pods deleted, as Kueue does), kinds stopped by
deleting their pods and kinds whose jobs are made from their pods keep their own rules for pods
beyond their count; so does a job whose pods it controls itself (its own spec is what its
Workload was made from: a change to it is Kueue's not-matching rule's). Every other job, whose
pods come through children, is looked at here.
"""

from __future__ import annotations

import structlog

from reconciler.api import Pod, Workload
from reconciler.api.resources import PODS
from reconciler.core.model.overrun import overrun
from reconciler.core.scheduling.podsready import Evict, plan_timeout
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.evictions import Eviction, Evictions
from reconciler.runtime.shared.store import JobRef

__all__ = ["PODS_EXCEED_CHARGE", "Overruns"]

log = structlog.get_logger(__name__)

# The Evicted condition's reason (and the eviction metric's) for this controller's own rule.
PODS_EXCEED_CHARGE = "PodsExceedCharge"
# Kueue's default requeue backoff (waitForPodsReady.requeuingStrategy): base and cap, seconds.
_BACKOFF_BASE, _BACKOFF_MAX = 60, 3600


class Overruns:
    def __init__(self, ctx: Context, evictions: Evictions) -> None:
        self.ctx = ctx
        self.evictions = evictions

    def stop_if_overrun(self, workload: Workload, owner: JobRef, pods: list[Pod]) -> bool:
        """Evict `workload` when its job (`owner`) runs more of `pods` than it was charged for;
        True when that is asked for."""
        integration = self.ctx.store.integrations.get(owner[0])
        if integration is None or integration.stop_deletes or integration.jobs_from_pods:
            return False
        if integration.resource == PODS:
            return False  # pods and pod groups: their own rules (excess pods deleted, as Kueue)
        if not any(_through_child(pod, owner) for pod in pods):
            return False  # (its own pods, or pods no controller made: a pod group's)
        found = overrun(workload, pods)
        if found is None:
            return False
        meta = workload.metadata
        message = found.message(f"{meta.namespace}/{meta.name}")
        log.warning(
            "job runs more pods than charged", job=f"{owner[0]} {owner[1]}/{owner[2]}", detail=message
        )
        plan = plan_timeout(
            workload.status.requeue_state,
            self.ctx.wall(),
            limit=None,
            base_seconds=_BACKOFF_BASE,
            max_seconds=_BACKOFF_MAX,
        )
        assert isinstance(plan, Evict)  # (no limit: never Deactivate)
        eviction = Eviction(PODS_EXCEED_CHARGE, message, PODS_EXCEED_CHARGE, requeue_state=plan.requeue_state)
        return self.evictions.evict(workload, eviction)


def _through_child(pod: Pod, owner: JobRef) -> bool:
    """Whether the pod's controller is another object than the job (one of its children)."""
    ref = next((r for r in pod.metadata.owner_references if r.controller), None)
    return ref is not None and (ref.kind, ref.name) != (owner[0], owner[2])
