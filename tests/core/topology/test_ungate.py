"""Which gated pods go to which domain (Kueue's topology ungater): by the pods' index when every
pod has a valid one and the released pods sit where their rank says, greedily otherwise."""

from __future__ import annotations

from reconciler.core.topology.assignment import encode_assignment
from reconciler.core.topology.placement import DomainCount, Placed
from reconciler.core.topology.ungate import GatedPod, assign_gated_pods

RACK, HOST = "rack", "kubernetes.io/hostname"
ASSIGNMENT = encode_assignment(
    Placed((RACK, HOST), (DomainCount(("r1", "n1"), 2), DomainCount(("r1", "n2"), 1)))
)


def sel(host: str) -> dict[str, str]:
    return {RACK: "r1", HOST: host}


def test_by_index_each_rank_goes_to_its_domain_in_the_assignments_order() -> None:
    pods = [GatedPod(f"p{i}", True, {}, str(i)) for i in (2, 0, 1)]
    assert assign_gated_pods(ASSIGNMENT, pods, by_index=True) == [
        ("p0", sel("n1")),
        ("p1", sel("n1")),
        ("p2", sel("n2")),
    ]


def test_greedily_the_released_pods_count_and_the_rest_fill_the_domains_in_order() -> None:
    pods = [
        GatedPod("a", False, {"other": "x", **sel("n1")}),
        GatedPod("b", True, {}),
        GatedPod("c", True, {}),
    ]
    assert assign_gated_pods(ASSIGNMENT, pods) == [("b", sel("n1")), ("c", sel("n2"))]


def test_a_released_pod_off_its_rank_makes_the_choice_greedy() -> None:
    """Pod 0 was released to n2 (not its rank's n1): ranks are not trusted, as in Kueue."""
    pods = [
        GatedPod("p0", False, sel("n2"), "0"),
        GatedPod("p1", True, {}, "1"),
        GatedPod("p2", True, {}, "2"),
    ]
    assert assign_gated_pods(ASSIGNMENT, pods, by_index=True) == [("p1", sel("n1")), ("p2", sel("n1"))]


def test_a_missing_or_repeated_index_makes_the_choice_greedy() -> None:
    pods = [GatedPod("x", True, {}, "1"), GatedPod("y", True, {}, "1")]
    assert assign_gated_pods(ASSIGNMENT, pods, by_index=True) == [("x", sel("n1")), ("y", sel("n1"))]
    pods = [GatedPod("x", True, {}, None), GatedPod("y", True, {}, "0")]
    assert assign_gated_pods(ASSIGNMENT, pods, by_index=True) == [("x", sel("n1")), ("y", sel("n1"))]


def test_no_more_pods_are_released_than_the_domains_hold() -> None:
    released = [GatedPod(f"r{i}", False, sel(h)) for i, h in enumerate(("n1", "n1", "n2"))]
    assert assign_gated_pods(ASSIGNMENT, [*released, GatedPod("extra", True, {})]) == []


def test_a_pod_set_of_several_jobs_ranks_a_pod_by_its_jobs_index_and_its_own() -> None:
    """A JobSet's replicated job of 3 Jobs x 1 pod: every pod's completion index is 0, its Job's
    index tells it apart (Kueue's subGroupIndexLabel): Job 2's pod is rank 2, on n2."""
    pods = [GatedPod(f"j{g}", True, {}, "0", str(g)) for g in (2, 0, 1)]
    assert assign_gated_pods(ASSIGNMENT, pods, by_index=True, groups=3) == [
        ("j0", sel("n1")),
        ("j1", sel("n1")),
        ("j2", sel("n2")),
    ]
    # Without the groups the same pods share rank 0: greedy, in the order given.
    assert assign_gated_pods(ASSIGNMENT, pods, by_index=True) == [
        ("j2", sel("n1")),
        ("j0", sel("n1")),
        ("j1", sel("n2")),
    ]


def test_a_jobs_index_or_a_pod_index_out_of_its_bounds_makes_the_choice_greedy() -> None:
    """3 pods in 3 Jobs: a Job index of 3, or a pod index of 1 (each Job runs one pod), is no rank."""
    bad_group = [GatedPod("a", True, {}, "0", "3"), GatedPod("b", True, {}, "0", "0")]
    assert assign_gated_pods(ASSIGNMENT, bad_group, by_index=True, groups=3) == [
        ("a", sel("n1")),
        ("b", sel("n1")),
    ]
    bad_index = [GatedPod("a", True, {}, "0", "2"), GatedPod("b", True, {}, "1", "0")]
    assert assign_gated_pods(ASSIGNMENT, bad_index, by_index=True, groups=3) == [
        ("a", sel("n1")),
        ("b", sel("n1")),
    ]
