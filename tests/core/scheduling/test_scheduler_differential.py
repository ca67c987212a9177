"""The scheduler admits exactly what a plain reference scheduler would.

The reference is written here from Kueue's documented rules for one ClusterQueue with one
resource group, and shares no code with the production scheduler (not its flavor assignment,
not its quota checks, not its workload model):

- order: higher priority first, then the older creation time, then the UID;
- flavors: tried in the ClusterQueue's order; a flavor is skipped when the job's nodeSelector
  names a label the flavor gives another value; the first flavor whose unused nominal quota
  covers the request is taken (no cohort, so no borrowing; no preemption policy);
- BestEffortFIFO: a workload that cannot be admitted is passed over;
  StrictFIFO: it blocks every workload behind it ("Older workloads that can't be admitted
  will block newer workloads, even if the newer workloads fit").

The production scheduler parks workloads by shape, keeps no-fit verdicts and skips settled
groups; none of that may change which workloads are admitted, on which flavor, as workloads
come, finish, are evicted (queued again) or are deleted while waiting.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.engine import Engine
from reconciler.core.model.workloads import compile_workload
from reconciler.core.scheduling.scheduler import Admit
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue, flavor, job

GPU = "nvidia.com/gpu"
FLAVOR_LABELS = {"a": {"zone": "a"}, "b": {"zone": "b"}}

Key = tuple[str, str]


@dataclass(frozen=True)
class Request:
    """What the reference knows of a job: its own copy, not the production model's."""

    key: Key
    gpus: int
    node_selector: dict[str, str]
    priority: int
    created: str
    uid: str


class ReferenceScheduler:
    def __init__(self, nominal: dict[str, int], strict_fifo: bool) -> None:
        self.nominal = nominal  # flavor -> GPUs, in the ClusterQueue's flavor order
        self.strict_fifo = strict_fifo
        self.waiting: dict[Key, Request] = {}
        self.admitted: dict[Key, tuple[str, Request]] = {}

    def used(self, flavor_name: str) -> int:
        return sum(r.gpus for f, r in self.admitted.values() if f == flavor_name)

    def flavor_for(self, request: Request) -> str | None:
        for name, quota in self.nominal.items():
            labels = FLAVOR_LABELS[name]
            if any(k in labels and labels[k] != v for k, v in request.node_selector.items()):
                continue
            if self.used(name) + request.gpus <= quota:
                return name
        return None

    def schedule(self) -> None:
        order = sorted(self.waiting.values(), key=lambda r: (-r.priority, r.created, r.uid))
        for request in order:
            chosen = self.flavor_for(request)
            if chosen is None:
                if self.strict_fifo:
                    return
                continue
            self.admitted[request.key] = (chosen, request)
            del self.waiting[request.key]

    def release(self, key: Key) -> Request:
        return self.admitted.pop(key)[1]

    def charges(self) -> dict[Key, dict[tuple[str, str], int]]:
        return {key: {(f, GPU): r.gpus} for key, (f, r) in self.admitted.items()}


def production_charges(engine: Engine) -> dict[Key, dict[tuple[str, str], int]]:
    out = {}
    for key in engine.ledger.holders():
        charge = engine.ledger.charge_of(key)
        assert charge is not None
        out[key] = {fr: amount for fr, amount in charge.usage.items() if amount}
    return out


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(0, 1))),
        st.tuples(st.just("add"), st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(0, 1))),
        st.tuples(st.just("finish"), st.integers(0, 10_000)),
        st.tuples(st.just("rollback"), st.integers(0, 10_000)),
        st.tuples(st.just("delete"), st.integers(0, 10_000)),
    ),
    min_size=15,
    max_size=60,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 6), st.sampled_from(["BestEffortFIFO", "StrictFIFO"]), ops)
def test_same_admissions_as_the_reference(
    quota: int, strategy: str, operations: list[tuple[str, object]]
) -> None:
    nominal = {"a": quota, "b": max(0, quota - 2)}
    state = Engine()
    for name, labels in FLAVOR_LABELS.items():
        state.set_flavor(flavor(name, labels))
    quotas = [(name, {GPU: amount}) for name, amount in nominal.items()]
    state.set_cluster_queue(cluster_queue("cq", quotas, strategy=strategy))
    state.set_local_queue("ns", "lq", "cq")
    state.set_namespace("ns", {})
    reference = ReferenceScheduler(nominal, strict_fifo=strategy == "StrictFIFO")
    admitted: list[Key] = []
    for n, (op, arg) in enumerate(operations):
        if op == "add":
            assert isinstance(arg, tuple)
            gpus, zone, priority = arg
            selector = {"zone": "b"} if zone == 2 else {}
            created = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"
            spec = job(f"j{n}", uid=f"u{n:04d}", requests={GPU: str(gpus)}, node_selector=selector or None)
            info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
            info.created = created
            info.priority = priority
            state.add_workload(info)
            reference.waiting[info.key] = Request(info.key, gpus, selector, priority, created, f"u{n:04d}")
        elif op == "delete":
            # A waiting workload is deleted (its Job gone): no quota comes back.
            assert isinstance(arg, int)
            if reference.waiting:
                key = sorted(reference.waiting)[arg % len(reference.waiting)]
                del reference.waiting[key]
                state.remove_workload(key)
        elif admitted:
            assert isinstance(arg, int)
            key = admitted.pop(arg % len(admitted))
            request = reference.release(key)
            if op == "finish":
                state.remove_workload(key)
            else:
                # Evicted and queued again, in its original queue position.
                state.rollback(key)
                reference.waiting[key] = request
        for decision in state.schedule():
            if isinstance(decision, Admit):
                admitted.append(decision.key)
        reference.schedule()
        assert production_charges(state) == reference.charges()
