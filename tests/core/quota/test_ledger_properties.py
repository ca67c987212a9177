"""Property tests: the ledger's invariants under random queues, flavors, quotas and jobs."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.api import WorkloadStatus
from reconciler.core.engine import Engine
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.core.quota.ledger import Ledger
from reconciler.core.scheduling.scheduler import Admit
from reconciler.core.status import admitted_workload_status
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue, flavor, job

RESOURCES = ("cpu", "memory", "nvidia.com/gpu")
QUANTITY = {"cpu": "{}", "memory": "{}Gi", "nvidia.com/gpu": "{}"}


@dataclass(frozen=True)
class Setup:
    flavors: list[str]
    queues: dict[str, list[tuple[str, dict[str, str]]]]  # cq -> [(flavor, quotas)]


@st.composite
def setups(draw: st.DrawFn) -> Setup:
    flavors = [f"f{i}" for i in range(draw(st.integers(1, 3)))]
    queues: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for c in range(draw(st.integers(1, 3))):
        chosen = draw(st.lists(st.sampled_from(flavors), min_size=1, max_size=len(flavors), unique=True))
        queues[f"cq{c}"] = [
            (f, {r: QUANTITY[r].format(draw(st.integers(0, 6))) for r in RESOURCES}) for f in chosen
        ]
    return Setup(flavors, queues)


job_specs = st.fixed_dictionaries(
    {
        "queue": st.integers(0, 2),
        "parallelism": st.integers(1, 2),
        "requests": st.dictionaries(st.sampled_from(RESOURCES), st.integers(1, 3), min_size=1, max_size=2),
    }
)
# Mostly arrivals, so queues fill up and quota runs out; some departures and rollbacks.
ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), job_specs),
        st.tuples(st.just("add"), job_specs),
        st.tuples(st.just("add"), job_specs),
        st.tuples(st.just("remove"), st.integers(0, 1000)),
        st.tuples(st.just("rollback"), st.integers(0, 1000)),
        st.tuples(st.just("evict"), st.integers(0, 1000)),
        st.tuples(st.just("requeue"), st.integers(0, 1000)),
    ),
    max_size=60,
)


def build(setup: Setup) -> Engine:
    state = Engine()
    for name in setup.flavors:
        state.set_flavor(flavor(name))
    for cq, flavors in setup.queues.items():
        state.set_cluster_queue(cluster_queue(cq, flavors, covered=list(RESOURCES)))
        state.set_local_queue("ns", f"lq-{cq}", cq)
    state.set_namespace("ns", {})
    return state


def quota_of(setup: Setup, cq: str, fl: str, resource: str) -> int:
    from reconciler.core.primitives.quantity import parse_quantity, to_amount

    for name, quotas in setup.queues[cq]:
        if name == fl:
            return to_amount(resource, parse_quantity(quotas[resource]))
    return 0


def assert_within_quota(setup: Setup, ledger: Ledger) -> None:
    for cq, usage in ledger.snapshot().items():
        for (fl, resource), used in usage.items():
            assert 0 < used <= quota_of(setup, cq, fl, resource), (cq, fl, resource, used)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(setups(), ops)
def test_ledger_invariants(setup: Setup, operations: list[tuple[str, object]]) -> None:
    state = build(setup)
    queues = sorted(setup.queues)
    statuses: dict[tuple[str, str], WorkloadStatus] = {}
    added: list[tuple[str, str]] = []
    held: dict[tuple[str, str], WorkloadInfo] = {}
    for n, (op, arg) in enumerate(operations):
        if op == "add":
            assert isinstance(arg, dict)
            spec = job(
                f"j{n}",
                queue=f"lq-{queues[arg['queue'] % len(queues)]}",
                uid=f"u{n}",
                parallelism=arg["parallelism"],
                completions=arg["parallelism"],
                requests={r: QUANTITY[r].format(v) for r, v in arg["requests"].items()},
            )
            info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
            info.created = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"
            state.add_workload(info)
            added.append(info.key)
        elif added:
            assert isinstance(arg, int)
            key = added[arg % len(added)]
            if op == "remove":
                state.remove_workload(key)
                statuses.pop(key, None)
                held.pop(key, None)
                added.remove(key)
            elif op == "evict" and key not in held:
                # waitForPodsReady: evicted into its requeue backoff.
                known = state.workload(key)
                assert known is not None
                held[key] = known
                state.hold(held[key])
                statuses.pop(key, None)
            elif op == "requeue" and key in held:
                state.add_workload(held.pop(key))
            elif op == "rollback" and state.is_admitted(key):
                state.rollback(key)
                statuses.pop(key, None)
        for decision in state.schedule():
            if isinstance(decision, Admit):
                statuses[decision.key] = admitted_workload_status(
                    WorkloadStatus(), decision, "2026-01-01T00:00:00Z"
                )
        # Invariant 1: never over quota, at every step.
        assert_within_quota(setup, state.ledger)
        assert set(statuses) == set(state.ledger.holders())
        # A workload in its backoff is never admitted.
        assert not set(held) & set(state.ledger.holders())

    # Invariant 3: the ledger rebuilt from the admitted Workloads' API status equals
    # the one reached step by step.
    rebuilt = Engine()
    rebuilt.rebuild((key, s.admission) for key, s in statuses.items() if s.admission)
    assert rebuilt.ledger.snapshot() == state.ledger.snapshot()

    # Invariant 2: releasing every workload returns the ledger to zero.
    for key in list(added):
        state.remove_workload(key)
        state.schedule()
        assert_within_quota(setup, state.ledger)
    assert state.ledger.snapshot() == {}
    assert state.ledger.holders() == []
