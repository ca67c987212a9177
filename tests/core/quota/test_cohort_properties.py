"""Property tests: quota shared in a cohort is never over-committed, whatever limits and jobs."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.core.engine import Engine
from reconciler.core.model.workloads import compile_workload
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue, flavor, job

GPU = "nvidia.com/gpu"
FR = ("t4", GPU)


@dataclass(frozen=True)
class Member:
    nominal: int
    borrowing_limit: int | None
    lending_limit: int | None


@st.composite
def members(draw: st.DrawFn) -> list[Member]:
    out = []
    for _ in range(draw(st.integers(2, 4))):
        nominal = draw(st.integers(0, 4))
        out.append(
            Member(
                nominal,
                draw(st.none() | st.integers(0, 4)),
                draw(st.none() | st.integers(0, nominal)),
            )
        )
    return out


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 3), st.integers(1, 3)),
        st.tuples(st.just("add"), st.integers(0, 3), st.integers(1, 2)),
        st.tuples(st.just("remove"), st.integers(0, 1000), st.just(0)),
    ),
    max_size=50,
)


def build(cohort: list[Member]) -> Engine:
    state = Engine()
    state.set_flavor(flavor("t4"))
    state.set_namespace("ns", {})
    for i, m in enumerate(cohort):
        limits: dict[str, int] = {}
        if m.borrowing_limit is not None:
            limits["borrowingLimit"] = m.borrowing_limit
        if m.lending_limit is not None:
            limits["lendingLimit"] = m.lending_limit
        body = cluster_queue(f"cq{i}", [("t4", {GPU: m.nominal})], cohort="pool", limits={FR: limits})
        state.set_cluster_queue(body)
        state.set_local_queue("ns", f"lq{i}", f"cq{i}")
    return state


def assert_cohort_invariants(cohort: list[Member], state: Engine) -> None:
    used = [state.ledger.used(f"cq{i}", FR) for i in range(len(cohort))]
    local = [m.nominal - m.lending_limit if m.lending_limit is not None else 0 for m in cohort]
    # The cohort never hands out more than its members hold together.
    assert sum(used) <= sum(m.nominal for m in cohort), (cohort, used)
    # What members use beyond their kept quota fits in what the cohort was lent.
    assert sum(max(0, u - k) for u, k in zip(used, local, strict=True)) <= sum(
        m.nominal - k for m, k in zip(cohort, local, strict=True)
    ), (cohort, used)
    for m, u in zip(cohort, used, strict=True):
        # Never more than its own quota plus what it may borrow.
        if m.borrowing_limit is not None:
            assert u <= m.nominal + m.borrowing_limit, (m, u)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members(), ops)
def test_a_cohort_is_never_over_committed(
    cohort: list[Member], operations: list[tuple[str, int, int]]
) -> None:
    state = build(cohort)
    added: list[tuple[str, str]] = []
    for n, (op, a, b) in enumerate(operations):
        if op == "add":
            spec = job(f"j{n}", queue=f"lq{a % len(cohort)}", uid=f"u{n}", requests={GPU: str(b)})
            info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
            info.created = f"2026-01-01T00:{n // 60:02d}:{n % 60:02d}Z"
            state.add_workload(info)
            added.append(info.key)
        elif added:
            key = added.pop(a % len(added))
            state.remove_workload(key)
        state.schedule()
        assert_cohort_invariants(cohort, state)
    # Releasing everything empties every member.
    for key in added:
        state.remove_workload(key)
    state.schedule()
    assert state.ledger.snapshot() == {}
