"""Cohort churn: what the scheduler keeps between cycles never changes a decision.

The optimised engine keeps no-fit verdicts by the figures along each head's cohort path and
keeps the cohort tree's shape-only arithmetic (ancestors, quotas, what a node could use at most,
heights) until the tree changes. The reference re-tries every woken head with a fresh flavor
assignment and a cohort tree that remembers nothing between two questions
(`Scheduler(kept=None)` over `ForgetfulCache`). On random cohort trees (flat or hierarchical,
lending and borrowing limits, preemption, StrictFIFO and BestEffortFIFO, fair sharing on or
off) and random streams of arrivals, finishes, deletions, evictions and changes of quota and of
the tree (a ClusterQueue's quota or cohort, a Cohort object's quota or parent, a Cohort object
deleted), both must make the very same decisions, cycle by cycle, and hold the same quota.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.api import ClusterQueue
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import compile_cluster_queue
from reconciler.core.model.workloads import compile_workload
from reconciler.core.quota.cache import QuotaCache
from reconciler.core.quota.capacity import CohortTree
from reconciler.core.quota.cohorts import compile_cohort
from reconciler.core.quota.ledger import Charge
from reconciler.core.scheduling.scheduler import Scheduler
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue_body, decode, flavor, job
from tests.support.cohort_trees import CPU, FLAVORS, GPU, PREEMPTION, Tree, cohort_object, step, trees

WorkloadKey = tuple[str, str]
FAIR = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


class ForgetfulCache(QuotaCache):
    """A quota cache whose cohort tree computes every answer afresh (no memo between calls)."""

    @property
    def capacity(self) -> CohortTree:
        return CohortTree(
            self.ledger, self.cluster_queues, self.cohorts, self.cohort_models, self.child_cohorts
        )


def cohorts_above(cache: QuotaCache, cluster_queue: str) -> set[str]:
    """The cohorts above a ClusterQueue, walked from its model (a cycle ends the walk)."""
    seen: set[str] = set()
    model = cache.cluster_queues.get(cluster_queue)
    current = None if model is None else model.cohort
    while current is not None and current not in seen:
        seen.add(current)
        parent = cache.cohort_models.get(current)
        current = None if parent is None else parent.parent
    return seen


class RetryEveryHead(Engine):
    """Quota released anywhere in a cohort tree re-tries every parked head of the tree, found here
    by its own walk (two ClusterQueues share a tree when the cohorts above them meet)."""

    def _freed(self, charge: Charge) -> None:
        above = cohorts_above(self.cache, charge.cluster_queue)
        for name in list(self.cache.cluster_queues):
            if name == charge.cluster_queue or above & cohorts_above(self.cache, name):
                self.queues.quota_freed(name)


def set_queue(state: Engine, tree: Tree, i: int, gpus: int | None = None, parent: str | None = "") -> None:
    """ClusterQueue cq{i} as the tree has it; `gpus` replaces its first flavor's GPUs and
    `parent` its cohort ("" keeps it)."""
    q = tree.queues[i]
    quotas = [(f, {GPU: g, CPU: c}) for f, (g, c) in zip(q.flavors, q.nominal, strict=True)]
    if gpus is not None:
        quotas[0] = (quotas[0][0], {GPU: gpus, CPU: quotas[0][1][CPU]})
    cohort = q.parent if parent == "" else parent
    limits: dict[tuple[str, str], dict[str, str | int]] = {}
    for f, r, kind, value in q.limits if cohort is not None else ():
        if kind == "lendingLimit" and f == quotas[0][0]:
            value = min(value, quotas[0][1][GPU])
        limits.setdefault((f, r), {})[kind] = value
    body = cluster_queue_body(f"cq{i}", quotas, cohort=cohort, limits=limits, strategy=q.strategy)
    preemption = PREEMPTION[q.preemption]
    if preemption is not None:
        body["spec"]["preemption"] = preemption
    state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))


def build(tree: Tree, fair: bool, reference: bool) -> Engine:
    reference_engine = RetryEveryHead(cache=ForgetfulCache(), scheduler=Scheduler(kept=None))
    state = reference_engine if reference else Engine()
    if fair:
        state.scheduler.fair_sharing = FAIR
    for name in FLAVORS:
        state.set_flavor(flavor(name))
    state.set_namespace("ns", {})
    for name, parent, gpus in tree.cohorts:
        state.set_cohort(compile_cohort(cohort_object(name, parent, gpus)))
    for i in range(len(tree.queues)):
        set_queue(state, tree, i)
        state.set_local_queue("ns", f"lq{i}", f"cq{i}")
    return state


Op = tuple[str, int, int, int, int]

KINDS = ["add"] * 4 + ["finish"] * 3 + ["delete", "evict", "requota", "move", "cohort", "uncohort"]


@st.composite
def one_op(draw: st.DrawFn) -> Op:
    """Mostly churn (arrivals and finishes); now and then a deletion, an eviction or a change of
    quota or of the tree."""
    kind = draw(st.sampled_from(KINDS))
    if kind == "add":  # (queue, GPUs, CPUs, priority)
        gpus = draw(st.integers(1, 3))
        return (kind, draw(st.integers(0, 3)), gpus, draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    if kind == "requota":  # (queue, its first flavor's GPUs)
        return (kind, draw(st.integers(0, 3)), draw(st.integers(0, 4)), 0, 0)
    if kind == "move":  # (queue, index of its new cohort among the tree's, or none past them)
        return (kind, draw(st.integers(0, 3)), draw(st.integers(0, 3)), 0, 0)
    if kind == "cohort":  # (index of a Cohort object, its own t4 GPUs, its parent: see `apply`)
        return (kind, draw(st.integers(0, 2)), draw(st.integers(0, 3)), draw(st.integers(0, 4)), 0)
    return (kind, draw(st.integers(0, 1000)), 0, 0, 0)  # which admitted or waiting workload


ops = st.lists(one_op(), min_size=10, max_size=80)


def apply(
    state: Engine, tree: Tree, op: Op, n: int, admitted: list[WorkloadKey], waiting: list[WorkloadKey]
) -> None:
    """One operation on one engine (the lists are this engine's own view of its workloads)."""
    kind, a, b, c, priority = op
    queues = len(tree.queues)
    if kind == "add":
        requests = {GPU: str(b), **({CPU: str(c)} if c else {})}
        spec = job(f"j{n}", queue=f"lq{a % queues}", uid=f"u{n:04d}", requests=requests)
        info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, name: None, mappings={})
        info.created = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"
        info.priority = priority
        state.add_workload(info)
    elif kind == "finish" and admitted:
        state.remove_workload(admitted.pop(a % len(admitted)))
    elif kind == "delete" and waiting:
        state.remove_workload(waiting[a % len(waiting)])
    elif kind == "evict" and admitted:
        state.release(admitted.pop(a % len(admitted)))  # back to its queue, as after an eviction
    elif kind == "requota":
        set_queue(state, tree, a % queues, gpus=b)
    elif kind == "move":
        parents = [name for name, _, _ in tree.cohorts] or ["pool"]
        set_queue(state, tree, a % queues, parent=None if b >= len(parents) else parents[b])
    elif kind in ("cohort", "uncohort"):
        # The tree's Cohort objects (a flat tree's cohort as one); parents: as drawn, none, or
        # another cohort (which may close a cycle).
        cohorts = tree.cohorts or (("pool", None, None),)
        name, parent, _ = cohorts[a % len(cohorts)]
        if kind == "uncohort":
            state.delete_cohort(name)
            return
        choices: list[str | None] = [parent, None, *(other for other, _, _ in cohorts if other != name)]
        state.set_cohort(compile_cohort(cohort_object(name, choices[c % len(choices)], b)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trees(), st.booleans(), ops)
def test_churn_decides_exactly_as_retrying_every_head_afresh(
    tree: Tree, fair: bool, operations: list[Op]
) -> None:
    kept, fresh = build(tree, fair, reference=False), build(tree, fair, reference=True)
    admitted: tuple[list[WorkloadKey], list[WorkloadKey]] = ([], [])
    for n, op in enumerate(operations):
        for state, ours in zip((kept, fresh), admitted, strict=True):
            waiting = sorted(state.queues.workloads)
            apply(state, tree, op, n, ours, waiting)
        assert step(kept, admitted[0]) == step(fresh, admitted[1]), (n, op)
        assert kept.ledger.snapshot() == fresh.ledger.snapshot(), (n, op)
        assert admitted[0] == admitted[1]


def test_the_forgetful_reference_remembers_nothing() -> None:
    """The reference's tree keeps no figures between questions: every call starts from nothing."""
    cache = ForgetfulCache()
    first, second = cache.capacity, cache.capacity
    first.shape_memo["probe"] = 1
    assert first.memo is not second.memo
    assert "probe" not in second.shape_memo
