"""The restart benchmark's objects (bench/restart_scale_objects.py): N Workloads split into admitted
and pending as asked, admissions within each ClusterQueue's quota, and exactly ``free_slots``
pending Workloads per queue fitting once the ledger holds the admitted ones."""

from __future__ import annotations

from collections import Counter

import pytest

from bench.restart_scale_objects import (
    FLAVOR,
    Layout,
    Plan,
    WorkloadPlan,
    admission_patch,
    plan,
    queue_objects,
    workload_body,
)
from e2e.support.workloads import parse_quantity


def _quota_milli(p: Plan) -> dict[str, int]:
    """Each ClusterQueue's cpu nominalQuota in millicores, read from the objects that are stored."""
    out: dict[str, int] = {}
    for obj in queue_objects(p):
        if obj["kind"] == "ClusterQueue":
            (resource,) = obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
            out[obj["metadata"]["name"]] = int(parse_quantity(resource["nominalQuota"]) * 1000)
    return out


def _charged_milli(p: Plan) -> Counter[str]:
    """What the admitted Workloads charge per ClusterQueue, read from their admission patches."""
    charged: Counter[str] = Counter()
    created = {"metadata": {"resourceVersion": "7", "generation": 1}}
    for w in p.workloads:
        if w.admitted:
            admission = admission_patch(w, p.layout.cpu_milli, created, "2026-01-01T00:00:00Z")["status"]
            admission = admission["admission"]
            for psa in admission["podSetAssignments"]:
                charged[admission["clusterQueue"]] += int(parse_quantity(psa["resourceUsage"]["cpu"]) * 1000)
    return charged


@pytest.mark.parametrize(
    ("workloads", "queues", "pending_percent"),
    [(50_000, 4, 10.0), (2_000, 4, 10.0), (1_003, 3, 5.0), (8, 4, 10.0)],
)
def test_the_workloads_split_into_admitted_and_pending_as_asked(
    workloads: int, queues: int, pending_percent: float
) -> None:
    p = plan(Layout(workloads, cluster_queues=queues, pending_percent=pending_percent))
    assert len(p.workloads) == workloads
    assert len({(w.namespace, w.name) for w in p.workloads}) == workloads
    assert p.admitted + p.pending == workloads
    assert sum(w.admitted for w in p.workloads) == p.admitted
    per_queue = Counter(w.cluster_queue for w in p.workloads)
    for q in p.queues:
        assert q.admitted + q.pending == per_queue[q.cluster_queue]
        assert q.pending >= 1
        assert q.admitted >= 1
        assert abs(q.pending - per_queue[q.cluster_queue] * pending_percent / 100) <= 1
    assert max(per_queue.values()) - min(per_queue.values()) <= 1


def test_admissions_are_within_quota_and_exactly_the_free_slots_fit() -> None:
    p = plan(Layout(2_000, cluster_queues=4, free_slots=3))
    quota, charged = _quota_milli(p), _charged_milli(p)
    assert set(quota) == {q.cluster_queue for q in p.queues}
    for cq, limit in quota.items():
        free = limit - charged[cq]
        assert 0 <= charged[cq] <= limit
        # every Workload asks the same: exactly three more fit in each queue, not four
        assert free // p.layout.cpu_milli == 3
    assert p.fitting == 4 * 3


def test_pending_workloads_are_the_newest_of_each_queue() -> None:
    p = plan(Layout(100, cluster_queues=2, pending_percent=20))
    for q in p.queues:
        states = [w.admitted for w in p.workloads if w.cluster_queue == q.cluster_queue]
        assert states == [True] * q.admitted + [False] * q.pending


def test_a_workload_and_its_admission_agree() -> None:
    w = WorkloadPlan("restart-01-1", "wl-01-000003", "restart-cq-01", admitted=True)
    body = workload_body(w, 250)
    (pod_set,) = body["spec"]["podSets"]
    (container,) = pod_set["template"]["spec"]["containers"]
    assert (body["metadata"]["namespace"], body["metadata"]["name"]) == (w.namespace, w.name)
    assert body["spec"]["queueName"] == "lq"
    assert container["resources"]["requests"] == {"cpu": "250m"}
    created = {"metadata": {"resourceVersion": "41", "generation": 2}}
    patch = admission_patch(w, 250, created, "2026-01-01T00:00:00Z")
    assert patch["metadata"] == {"resourceVersion": "41"}
    conditions = {c["type"]: c for c in patch["status"]["conditions"]}
    assert {k: c["status"] for k, c in conditions.items()} == {"QuotaReserved": "True", "Admitted": "True"}
    assert conditions["QuotaReserved"]["message"] == "Quota reserved in ClusterQueue restart-cq-01"
    assert all(c["observedGeneration"] == 2 for c in conditions.values())
    (psa,) = patch["status"]["admission"]["podSetAssignments"]
    assert psa["name"] == pod_set["name"]
    assert psa["count"] == pod_set["count"]
    assert psa["flavors"] == {"cpu": FLAVOR}
    assert psa["resourceUsage"] == container["resources"]["requests"]


def test_every_namespace_has_a_local_queue_to_its_cluster_queue() -> None:
    p = plan(Layout(40, cluster_queues=2, namespaces_per_queue=3))
    objects = queue_objects(p)
    spaces = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
    local = {
        o["metadata"]["namespace"]: o["spec"]["clusterQueue"] for o in objects if o["kind"] == "LocalQueue"
    }
    assert spaces == set(local) == {w.namespace for w in p.workloads}
    for w in p.workloads:
        assert local[w.namespace] == w.cluster_queue


@pytest.mark.parametrize(
    "layout",
    [
        {"workloads": 7, "cluster_queues": 4},
        {"workloads": 100, "pending_percent": 0},
        {"workloads": 100, "pending_percent": 100},
        {"workloads": 100, "free_slots": 0},
    ],
)
def test_a_layout_that_cannot_give_both_kinds_is_refused(layout: dict[str, int]) -> None:
    with pytest.raises(ValueError, match=r"must|at least"):
        Layout(**layout)
