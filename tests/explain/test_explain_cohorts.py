"""`reconciler explain` under hierarchical cohorts: the Cohort objects' own quota counts, as in the
controller (explain feeds the engine through the same feed)."""

from __future__ import annotations

from reconciler.api import Cohort
from reconciler.explain.analyze import explain
from reconciler.explain.state import ClusterState
from tests.support.explain_state import NS, PENDING_MESSAGE, decode, walkthrough_state

GPU = "nvidia.com/gpu"
B = "kueue-dra-pending-b"


def _cohort(name: str, parent: str | None, gpus: int | None) -> Cohort:
    spec: dict[str, object] = {"parentName": parent} if parent else {}
    if gpus is not None:
        quota = {"name": GPU, "nominalQuota": gpus}
        spec["resourceGroups"] = [
            {"coveredResources": [GPU], "flavors": [{"name": "p3-t4", "resources": [quota]}]}
        ]
    result: Cohort = decode({"metadata": {"name": name}, "spec": spec}, Cohort)
    return result


def under_cohorts(gpus_at_the_root: int) -> ClusterState:
    """The walkthrough with p3-dra-cq in cohort `team`, a child of `org`, which holds GPUs of its own."""
    state = walkthrough_state("job", B)
    (cq,) = state.cluster_queues
    cq.spec.cohort_name = "team"
    state.cohorts = [_cohort("org", None, gpus_at_the_root), _cohort("team", "org", None)]
    return state


def test_job_b_fits_by_borrowing_from_the_root_cohorts_quota() -> None:
    ex = explain(under_cohorts(gpus_at_the_root=1))
    assert ex.state == "pending"
    assert ex.summary == (
        "it fits now in ClusterQueue p3-dra-cq: the controller admits it within seconds; "
        "if it stays pending, check that `reconciler run` is running and leads"
    )


def test_without_quota_at_the_root_job_b_still_waits_for_job_a() -> None:
    ex = explain(under_cohorts(gpus_at_the_root=0))
    assert ex.summary == (
        f"it waits for quota in ClusterQueue p3-dra-cq, held by Job {NS}/kueue-dra-running-a: "
        f"{PENDING_MESSAGE}"
    )
