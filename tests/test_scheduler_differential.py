"""The grouped scheduler admits exactly what a naive one would.

The reference re-evaluates every waiting workload in queue order on every
pass. `Admission` parks workloads by shape and skips settled groups; these
must never change which workloads are admitted.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.api import ResourceFlavor
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import ClusterQueueModel
from reconciler.core.model.workloads import WorkloadInfo, compile_workload, workload_for_job
from reconciler.core.quota.capacity import NominalCapacity
from reconciler.core.quota.ledger import Charge, Ledger
from reconciler.core.scheduling.flavors import FlavorFit, assign_flavors
from reconciler.core.scheduling.scheduler import Admit
from tests.support.builders import cluster_queue, flavor, job

GPU = "nvidia.com/gpu"


class NaiveScheduler:
    def __init__(self, model: ClusterQueueModel, flavors: dict[str, ResourceFlavor]) -> None:
        self.model = model
        self.flavors = flavors
        self.ledger = Ledger()
        self.waiting: dict[tuple[str, str], WorkloadInfo] = {}

    def schedule(self) -> None:
        order = sorted(self.waiting.values(), key=lambda i: (-i.priority, i.created, i.uid))
        for info in order:
            fit = assign_flavors(info, self.model, self.flavors, NominalCapacity(self.ledger))
            if isinstance(fit, FlavorFit):
                self.ledger.reserve(info.key, Charge(self.model.name, fit.usage))
                del self.waiting[info.key]
            elif self.model.strategy == "StrictFIFO" and fit.waiting_for_quota:
                return


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(0, 1))),
        st.tuples(st.just("add"), st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(0, 1))),
        st.tuples(st.just("finish"), st.integers(0, 10_000)),
        st.tuples(st.just("rollback"), st.integers(0, 10_000)),
    ),
    min_size=15,
    max_size=60,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 6), st.sampled_from(["BestEffortFIFO", "StrictFIFO"]), ops)
def test_same_admissions_as_naive(quota: int, strategy: str, operations: list[tuple[str, object]]) -> None:
    flavors = {"a": flavor("a", {"zone": "a"}), "b": flavor("b", {"zone": "b"})}
    model = cluster_queue("cq", [("a", {GPU: quota}), ("b", {GPU: max(0, quota - 2)})], strategy=strategy)
    state = Engine()
    for f in flavors.values():
        state.set_flavor(f)
    state.set_cluster_queue(model)
    state.set_local_queue("ns", "lq", "cq")
    state.set_namespace("ns", {})
    naive = NaiveScheduler(model, flavors)
    admitted: list[tuple[str, str]] = []
    for n, (op, arg) in enumerate(operations):
        if op == "add":
            assert isinstance(arg, tuple)
            gpus, zone, priority = arg
            selector = {"zone": "b"} if zone == 2 else None
            spec = job(f"j{n}", uid=f"u{n:04d}", requests={GPU: str(gpus)}, node_selector=selector)
            info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
            info.created = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"
            info.priority = priority
            state.add_workload(info)
            naive.waiting[info.key] = info
        elif admitted:
            assert isinstance(arg, int)
            key = admitted.pop(arg % len(admitted))
            if op == "finish":
                state.remove_workload(key)
                naive.ledger.release(key)
            else:
                state.rollback(key)
                charge = naive.ledger.release(key)
                assert charge is not None
                # Put it back as it was, in its original queue position.
                back = state.workload(key)
                assert back is not None
                naive.waiting[key] = back
        for decision in state.schedule():
            if isinstance(decision, Admit):
                admitted.append(decision.key)
        naive.schedule()
        assert sorted(state.ledger.holders()) == sorted(naive.ledger.holders())
        assert state.ledger.snapshot() == naive.ledger.snapshot()
