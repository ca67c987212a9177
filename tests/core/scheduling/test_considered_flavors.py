"""The flavors tried on the way to an admission, as Kueue's QuotaReserved Event lists them."""

from __future__ import annotations

from reconciler.api import ClusterQueue, WorkloadStatus
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import compile_cluster_queue
from reconciler.core.model.workloads import WorkloadInfo, compile_workload
from reconciler.core.scheduling.scheduler import Admit, Pending
from reconciler.core.status import admitted_workload_status
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue, cluster_queue_body, decode, flavor, job

GPU = "nvidia.com/gpu"


def gpu_job(name: str, queue: str = "lq", gpus: int = 1, created: int = 0) -> WorkloadInfo:
    spec = job(name, queue=queue, uid=f"uid-{name}", requests={GPU: str(gpus)})
    info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
    info.name = name
    info.created = f"2026-01-01T00:00:{created:02d}Z"
    return info


def admissions(state: Engine) -> dict[str, str]:
    return {d.key[1]: d.considered for d in state.schedule() if isinstance(d, Admit)}


def two_flavor_state(preemption: dict[str, str] | None = None) -> Engine:
    state = Engine()
    state.set_flavor(flavor("t4", {"gpu": "t4"}))
    state.set_flavor(flavor("a100", {"gpu": "a100"}))
    state.set_namespace("ns", {})
    body = cluster_queue_body("cq", [("t4", {GPU: 1}), ("a100", {GPU: 1})])
    if preemption:
        body["spec"]["preemption"] = preemption
    state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
    state.set_local_queue("ns", "lq", "cq")
    return state


def test_the_first_flavor_fitting_without_borrowing_lists_nothing() -> None:
    state = two_flavor_state()
    state.add_workload(gpu_job("a"))
    assert admissions(state) == {"a": ""}


def test_a_full_flavor_passed_over_is_listed_with_its_reason_and_no_candidates() -> None:
    state = two_flavor_state()
    state.add_workload(gpu_job("a", created=1))
    state.add_workload(gpu_job("b", created=2))
    assert admissions(state) == {
        "a": "",
        "b": "main: t4(preemptionMode=NoCandidates;insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, 1 more needed)",
    }


def test_a_flavor_whose_labels_the_pod_cannot_take_is_no_fit() -> None:
    state = two_flavor_state()
    spec = job("pinned", queue="lq", uid="uid-pinned", requests={GPU: "1"}, node_selector={"gpu": "a100"})
    info = compile_workload(workload_for_job(spec), lookup_template=lambda ns, n: None, mappings={})
    state.add_workload(info)
    (considered,) = admissions(state).values()
    assert considered == "main: t4(NoFit;flavor t4 doesn't match node affinity)"


def test_borrowing_shows_fit_with_borrow() -> None:
    state = Engine()
    state.set_flavor(flavor("t4"))
    state.set_namespace("ns", {})
    state.set_cluster_queue(cluster_queue("lender", [("t4", {GPU: 1})], cohort="pool"))
    state.set_cluster_queue(cluster_queue("borrower", [("t4", {GPU: 0})], cohort="pool"))
    state.set_local_queue("ns", "lq", "borrower")
    state.add_workload(gpu_job("b"))
    assert admissions(state) == {"b": "main: t4(Fit;borrow=1)"}


def test_an_admission_seen_again_does_not_wake_what_is_parked() -> None:
    """Kueue retries a parked workload when quota is released, not when an admission's own
    status comes back through the watch; its Pending message stays as first written."""
    state = Engine()
    state.set_flavor(flavor("t4"))
    state.set_namespace("ns", {})
    state.set_cluster_queue(cluster_queue("cq", [("t4", {GPU: 2})]))
    state.set_local_queue("ns", "lq", "cq")
    state.add_workload(gpu_job("a", created=1))
    assert list(admissions(state)) == ["a"]
    state.add_workload(gpu_job("big", gpus=2, created=2))
    (pending,) = state.schedule()
    assert isinstance(pending, Pending)
    assert pending.message.endswith("1 more needed")
    small = gpu_job("small", created=3)
    state.add_workload(small)
    (admit,) = state.schedule()
    assert isinstance(admit, Admit)
    assert admit.key[1] == "small"
    seen_again = admitted_workload_status(WorkloadStatus(), admit, "2026-01-01T00:00:04Z", None)
    assert seen_again.admission is not None
    state.add_workload(small, seen_again.admission)
    assert state.schedule() == []  # "big" keeps its verdict
    state.remove_workload(("ns", "a"))  # quota released: now it is tried again
    state.remove_workload(("ns", "small"))
    assert list(admissions(state)) == ["big"]
