"""Which gated pods of a pod set go to which topology domain, as Kueue v0.18.1's ungater decides.

A pod set admitted with a ``topologyAssignment`` runs pods held by the scheduling gate
``kueue.x-k8s.io/topology``. Each is released with the node labels of one assigned domain as its
node selector (the level keys with the domain's values), so that the kube-scheduler places it
within that domain. Two ways, as Kueue:

- by rank, when the pod set has a pod index label (a batch/v1 Job: the completion index) and every
  pod carries a valid, distinct index below the pod set's size: the ranks are laid out over the
  domains in the assignment's order (the first domain's count of ranks, then the next...), and a
  gated pod goes to its rank's domain. Used only while every released pod sits where its rank says.
  A pod set run by several Jobs (a JobSet's replicated job: `groups` Jobs of equal size, each
  numbering its pods from 0) ranks a pod by its Job's index too: index + Job index x pods per Job.
- greedily otherwise: the pods already released are counted per domain (by their node selector),
  then each domain, in the assignment's order, takes gated pods (in the order given) until it
  holds its count.

Terminated pods are left out by the caller. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reconciler.api import TopologyAssignment

from .assignment import decode_assignment

__all__ = ["TOPOLOGY_GATE", "WORKLOAD_ANNOTATION", "GatedPod", "assign_gated_pods"]

TOPOLOGY_GATE = "kueue.x-k8s.io/topology"
# The annotation naming a pod's Workload, which Kueue's start puts on TAS pods.
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"


@dataclass(frozen=True, slots=True)
class GatedPod:
    """A live pod of the pod set: its name, whether it still carries the topology gate, its node
    selector, its value of the pod index label and of the Job index label (None when it has
    none)."""

    name: str
    gated: bool
    node_selector: Mapping[str, str]
    index: str | None = None
    group: str | None = None


def assign_gated_pods(
    assignment: TopologyAssignment,
    pods: Sequence[GatedPod],
    *,
    by_index: bool = False,
    groups: int | None = None,
) -> list[tuple[str, dict[str, str]]]:
    """(pod name, node selector to add) for each gated pod to release now, in the given order.
    `by_index`: the pod set has a pod index label (the pods' `index`); `groups`: it is run by
    that many Jobs, numbered by the pods' `group`."""
    placed = decode_assignment(assignment)
    levels = placed.levels
    ranks = [d.values for d in placed.domains for _ in range(d.count)]
    if by_index:
        by_rank = _ranks(pods, len(ranks), groups)
        if by_rank is not None and all(
            _values(levels, pod.node_selector) == ranks[rank]
            for rank, pod in by_rank.items()
            if not pod.gated
        ):
            return [
                (pod.name, dict(zip(levels, ranks[rank], strict=True)))
                for rank, pod in sorted(by_rank.items())
                if pod.gated
            ]
    released: dict[tuple[str | None, ...], int] = {}
    gated = [pod for pod in pods if pod.gated]
    for pod in pods:
        if not pod.gated:
            key = _values(levels, pod.node_selector)
            released[key] = released.get(key, 0) + 1
    out: list[tuple[str, dict[str, str]]] = []
    for domain in placed.domains:
        missing = max(domain.count - released.get(domain.values, 0), 0)
        take = gated[len(out) : len(out) + missing]
        out += [(pod.name, dict(zip(levels, domain.values, strict=True))) for pod in take]
    return out


def _values(levels: Sequence[str], selector: Mapping[str, str]) -> tuple[str | None, ...]:
    return tuple(selector.get(level) for level in levels)


def _ranks(pods: Sequence[GatedPod], size: int, groups: int | None) -> dict[int, GatedPod] | None:
    """Each pod by its rank, or None when a pod has no index, a bad one, or one taken twice
    (with `groups`: no Job index below `groups`, or a pod index not below the pods per Job)."""
    per_group = size // groups if groups else size
    out: dict[int, GatedPod] = {}
    for pod in pods:
        index = _number(pod.index, size)
        if index is None:
            return None
        rank = index
        if groups:
            group = _number(pod.group, groups)
            if group is None or index >= per_group:
                return None
            rank = index + group * per_group
        if rank >= size or rank in out:
            return None
        out[rank] = pod
    return out


def _number(value: str | None, bound: int) -> int | None:
    """A label's value as a number below `bound` (None: missing, not a number, or too big)."""
    if value is None or not value.isdigit():
        return None
    number = int(value)
    return number if number < bound else None
