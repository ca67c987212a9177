"""What the loop does with a scheduling cycle's decisions, and which ClusterQueue changes the core
is told of."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.api import ClusterQueue
from reconciler.core.scheduling.scheduler import Admit, Decision, Preempt
from reconciler.runtime.workloads.concern import Workloads
from reconciler.runtime.workloads.preemption import Preemption

__all__ = ["carry_out", "models_differ"]


def models_differ(previous: ClusterQueue, current: ClusterQueue) -> bool:
    """Whether a ClusterQueue changed as the core models it (spec, deletion)."""
    return (
        previous.spec != current.spec
        or previous.metadata.deletion_timestamp != current.metadata.deletion_timestamp
    )


def carry_out(decisions: Sequence[Decision], workloads: Workloads, preemption: Preemption) -> None:
    """Write a cycle's decisions. A workload's status is written once per cycle, with its last
    verdict (a cycle here can take a head several times, as several of Kueue's cycles would);
    the Event of each verdict stays."""
    last = {d.key: d for d in decisions if not isinstance(d, Preempt)}
    for decision in decisions:
        if isinstance(decision, Admit):
            workloads.admit(decision)
        elif isinstance(decision, Preempt):
            preemption.preempt(decision)
        else:
            workloads.pending(decision, write=last[decision.key] is decision)
