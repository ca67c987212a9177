"""Cohorts: ClusterQueues lend unused quota to each other within borrowing and lending limits."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.api import ClusterQueue, ClusterQueueStatus
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import InvalidClusterQueueError, compile_cluster_queue
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.core.scheduling.scheduler import Admit, Pending
from reconciler.core.status import cluster_queue_status
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue, cluster_queue_body, decode, flavor, job

GPU = "nvidia.com/gpu"


def gpu_job(name: str, queue: str, gpus: int = 1) -> WorkloadInfo:
    spec = job(name, queue=queue, uid=f"uid-{name}", requests={GPU: str(gpus)})
    info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
    info.name = name  # keyed by the job name to keep the tests short
    info.created = f"2026-01-01T00:00:{len(name):02d}Z"
    return info


def cohort_state(*queues: tuple[str, int], **body: Any) -> Engine:
    """One flavor t4; ClusterQueues in cohort `pool` with their nominal GPUs; LocalQueue lq-<cq>."""
    state = Engine()
    state.set_flavor(flavor("t4"))
    state.set_namespace("ns", {})
    for name, gpus in queues:
        extra = body.get(name, {})
        state.set_cluster_queue(cluster_queue(name, [("t4", {GPU: gpus})], cohort="pool", **extra))
        state.set_local_queue("ns", f"lq-{name}", name)
    return state


def admitted(state: Engine) -> list[str]:
    return sorted(d.key[1] for d in state.schedule() if isinstance(d, Admit))


def test_a_member_borrows_what_another_does_not_use_and_the_lender_gets_it_back() -> None:
    state = cohort_state(("a", 1), ("b", 1))
    state.add_workload(gpu_job("a1", "lq-a"))
    state.add_workload(gpu_job("a2", "lq-a"))
    assert admitted(state) == ["a1", "a2"]  # a2 borrows b's idle GPU
    assert state.ledger.used("a", ("t4", GPU)) == 2
    state.add_workload(gpu_job("b1", "lq-b"))
    (pending,) = state.schedule()
    assert isinstance(pending, Pending)
    assert pending.message.endswith(
        "insufficient unused quota for nvidia.com/gpu in flavor t4, 1 more needed"
    )
    state.remove_workload(("ns", "a2"))  # the borrower finishes
    assert admitted(state) == ["b1"]


def test_borrowing_limit_caps_what_a_member_takes_from_the_cohort() -> None:
    limits = {("t4", GPU): {"borrowingLimit": 1}}
    state = cohort_state(("a", 1), ("b", 3), a={"limits": limits})
    for name in ("a1", "a2", "a3"):
        state.add_workload(gpu_job(name, "lq-a"))
    assert admitted(state) == ["a1", "a2"]  # 1 own + 1 borrowed, though b has 3 idle
    status = cluster_queue_status(state, "a", ClusterQueueStatus(), "2026-01-01T00:00:00Z")
    (usage,) = status.flavors_reservation[0].resources
    assert (usage.total, usage.borrowed) == ("2", "1")


def test_lending_limit_keeps_part_of_a_members_quota_for_itself() -> None:
    state = cohort_state(("a", 0), ("b", 3), b={"limits": {("t4", GPU): {"lendingLimit": 1}}})
    for name in ("a1", "a2"):
        state.add_workload(gpu_job(name, "lq-a"))
    assert admitted(state) == ["a1"]  # b lends only 1 of its 3
    for name in ("b1", "b2", "b3"):
        state.add_workload(gpu_job(name, "lq-b"))
    assert admitted(state) == ["b1", "b2"]  # b's 2 kept GPUs; its lent one is in use by a
    assert state.ledger.used("b", ("t4", GPU)) == 2


def test_a_workload_larger_than_the_whole_cohort_says_so() -> None:
    state = cohort_state(("a", 1), ("b", 1))
    state.add_workload(gpu_job("big", "lq-a", gpus=3))
    (pending,) = state.schedule()
    assert isinstance(pending, Pending)
    assert "> maximum capacity (2)" in pending.message


def test_without_a_cohort_nothing_is_borrowed() -> None:
    state = Engine()
    state.set_flavor(flavor("t4"))
    state.set_namespace("ns", {})
    for name in ("a", "b"):
        state.set_cluster_queue(cluster_queue(name, [("t4", {GPU: 1})]))
        state.set_local_queue("ns", f"lq-{name}", name)
    state.add_workload(gpu_job("a1", "lq-a"))
    state.add_workload(gpu_job("a2", "lq-a"))
    assert admitted(state) == ["a1"]


def test_try_next_flavor_prefers_a_flavor_that_fits_without_borrowing() -> None:
    def state_for(when_can_borrow: str | None) -> Engine:
        state = Engine()
        for name in ("spot", "reserved"):
            state.set_flavor(flavor(name))
        state.set_namespace("ns", {})
        flavors = [("spot", {GPU: 0}), ("reserved", {GPU: 1})]
        state.set_cluster_queue(cluster_queue("a", flavors, cohort="pool", when_can_borrow=when_can_borrow))
        state.set_cluster_queue(
            cluster_queue("lender", [("spot", {GPU: 2}), ("reserved", {GPU: 0})], cohort="pool")
        )
        state.set_local_queue("ns", "lq-a", "a")
        state.add_workload(gpu_job("a1", "lq-a"))
        return state

    (default,) = state_for(None).schedule()
    assert isinstance(default, Admit)
    assert default.pod_sets[0].flavors[GPU] == "spot"  # MayStopSearch: borrow from the first
    (fungible,) = state_for("TryNextFlavor").schedule()
    assert isinstance(fungible, Admit)
    assert fungible.pod_sets[0].flavors[GPU] == "reserved"


def test_leaving_the_cohort_returns_what_was_lent() -> None:
    state = cohort_state(("a", 0), ("b", 1))
    state.add_workload(gpu_job("a1", "lq-a"))
    assert admitted(state) == ["a1"]
    state.add_workload(gpu_job("a2", "lq-a"))
    state.set_cluster_queue(cluster_queue("b", [("t4", {GPU: 2})], cohort="pool"))  # more to lend
    assert admitted(state) == ["a2"]


@pytest.mark.parametrize(
    ("limit", "field", "fix"),
    [
        ({"borrowingLimit": 1}, "borrowingLimit", "set spec.cohortName"),
        ({"lendingLimit": 1}, "lendingLimit", "set spec.cohortName"),
    ],
)
def test_limits_without_a_cohort_name_the_field(limit: dict[str, int], field: str, fix: str) -> None:
    body = cluster_queue_body("a", [("t4", {GPU: 1})], limits={("t4", GPU): limit})
    with pytest.raises(InvalidClusterQueueError) as err:
        compile_cluster_queue(decode(body, ClusterQueue))
    assert f"spec.resourceGroups[0].flavors[0].resources[0].{field}" in str(err.value)
    assert fix in str(err.value)


def test_a_lending_limit_above_nominal_or_a_negative_quota_is_refused() -> None:
    over = cluster_queue_body(
        "a", [("t4", {GPU: 1})], cohort="pool", limits={("t4", GPU): {"lendingLimit": 2}}
    )
    with pytest.raises(InvalidClusterQueueError, match=r"lendingLimit: must be less than or equal"):
        compile_cluster_queue(decode(over, ClusterQueue))
    negative = cluster_queue_body("a", [("t4", {GPU: -1})])
    refused = r"nominalQuota: Invalid value: \"-1\": must be greater than or equal to 0"
    with pytest.raises(InvalidClusterQueueError, match=refused):
        compile_cluster_queue(decode(negative, ClusterQueue))
