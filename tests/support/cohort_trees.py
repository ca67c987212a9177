"""Random cohort trees and the steps of the selective-wakeup tests (flavors, preemption policies)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from reconciler.api import Cohort
from reconciler.core.engine import Engine
from reconciler.core.scheduling.scheduler import Admit, Decision, Preempt
from tests.support.builders import cohort_body, decode, t4_group

GPU = "nvidia.com/gpu"


CPU = "cpu"


FLAVORS = ("t4", "a100")


PREEMPTION = [
    None,
    {"withinClusterQueue": "LowerPriority"},
    {"reclaimWithinCohort": "Any"},
    {"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {"policy": "LowerPriority"}},
]


@dataclass(frozen=True)
class Queue:
    parent: str | None
    flavors: tuple[str, ...]
    nominal: tuple[tuple[int, int], ...]  # per flavor: (GPUs, CPUs)
    limits: tuple[tuple[str, str, str, int], ...]  # (flavor, resource, kind, value)
    strategy: str
    preemption: int


@dataclass(frozen=True)
class Tree:
    queues: tuple[Queue, ...]
    # Cohort objects: name -> (parent, own GPUs of t4 or None).
    cohorts: tuple[tuple[str, str | None, int | None], ...]


@st.composite
def trees(draw: st.DrawFn) -> Tree:
    hierarchical = draw(st.booleans())
    parents = ["left", "right"] if hierarchical else ["pool"]
    cohorts: list[tuple[str, str | None, int | None]] = []
    if hierarchical:
        cohorts = [
            ("left", "root", draw(st.none() | st.integers(0, 2))),
            ("right", draw(st.sampled_from(["root", None])), None),
            ("root", None, draw(st.none() | st.integers(0, 2))),
        ]
    queues = []
    for _ in range(draw(st.integers(2, 4))):
        names = draw(st.sampled_from([("t4",), ("a100",), ("t4", "a100"), ("a100", "t4")]))
        nominal = tuple((draw(st.integers(0, 3)), draw(st.integers(0, 3))) for _ in names)
        parent = draw(st.sampled_from([*parents, None]))
        limits = []
        for f, (gpus, _) in zip(names, nominal, strict=True):
            if parent is None:
                break  # limits need a cohort
            if draw(st.booleans()):
                limits.append((f, GPU, "borrowingLimit", draw(st.integers(0, 2))))
            if draw(st.booleans()):
                limits.append((f, GPU, "lendingLimit", draw(st.integers(0, gpus))))
        queues.append(
            Queue(
                parent,
                names,
                nominal,
                tuple(limits),
                draw(st.sampled_from(["BestEffortFIFO", "StrictFIFO"])),
                draw(st.integers(0, len(PREEMPTION) - 1)),
            )
        )
    return Tree(tuple(queues), tuple(cohorts))


def cohort_object(name: str, parent: str | None, gpus: int | None) -> Cohort:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if gpus is not None:
        quota = {"name": GPU, "nominalQuota": gpus}
        spec["resourceGroups"] = t4_group(quota)
    result: Cohort = decode(cohort_body(name, spec), Cohort)
    return result


def step(state: Engine, admitted: list[tuple[str, str]]) -> list[Decision]:
    """One cycle; preemption victims are evicted at once, as the runtime does once written."""
    decisions = state.schedule()
    for d in decisions:
        if isinstance(d, Admit):
            admitted.append(d.key)
        elif isinstance(d, Preempt):
            for target in d.targets:
                if target.key in admitted:
                    admitted.remove(target.key)
                    state.release(target.key)
    return decisions
