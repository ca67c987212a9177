"""A LeaderWorkerSet's rolling update with a surge, as Kueue v0.18.1 queues it: while the LWS
controller's `status.replicas` exceeds `spec.replicas` (maxSurge > 0, fewer groups updated than
wanted) the surge groups get Workloads too, waiting for quota like any group (without spare quota
the rollout waits) or admitted and ungated (with it); once the rollout is over, the surge group's
Workload is deleted as on a scale-down. A percentage `maxSurge` reads as 0, as Kueue reads it."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.api.resources import LEADERWORKERSETS, PODS
from reconciler.integrations.pods.pod import ADMISSION_GATE, TOPOLOGY_GATE
from tests.support.lws import lws_body, stored_lws
from tests.support.lws_cluster import lws_cluster
from tests.support.memory_cluster import Cluster
from tests.support.pod_queues import condition, gates, queues


def _surging_set(c: Cluster, max_surge: int | str) -> dict[str, Any]:
    """A set of two groups, both admitted, then its rolling update: the LWS controller reports
    three groups (one a surge), none updated yet, and makes the surge group's pods."""
    body = lws_body("a", replicas=2)
    body["spec"]["rolloutStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxSurge": max_surge, "maxUnavailable": 0},
    }
    lws = stored_lws(body)
    c.api.add(LEADERWORKERSETS, lws)
    for index in (0, 1):
        c.add_group(lws, index)
    c.settle()
    c.api.change(LEADERWORKERSETS, "ns", "a", {"status": {"replicas": 3, "updatedReplicas": 0}})
    c.add_group(lws, 2)
    c.settle()
    return lws


def _reserved(workload: dict[str, Any] | None) -> tuple[str, str]:
    assert workload is not None
    found = condition(workload, "QuotaReserved")
    assert found is not None
    return found["status"], found["message"]


def test_without_spare_quota_the_surge_group_waits_for_quota_with_kueues_message() -> None:
    c = lws_cluster()
    queues(c, gpus=4)  # two groups of two one-GPU pods
    lws = _surging_set(c, 1)
    surge = c.group_workload(lws, 2)
    assert surge is not None
    assert surge["metadata"]["annotations"]["kueue.x-k8s.io/component-workload-index"] == "2"
    assert _reserved(surge) == (
        "False",
        "couldn't assign flavors to pod set leader: insufficient unused quota for nvidia.com/gpu "
        "in flavor t4, 1 more needed; couldn't assign flavors to pod set worker: insufficient "
        "unused quota for nvidia.com/gpu in flavor t4, 2 more needed",
    )
    assert gates(c.pod("a-2")) == [ADMISSION_GATE, TOPOLOGY_GATE]
    assert _reserved(c.group_workload(lws, 0))[0] == _reserved(c.group_workload(lws, 1))[0] == "True"
    assert c.used_gpus() == 4


def test_with_spare_quota_the_surge_group_runs_and_goes_once_the_rollout_is_over() -> None:
    c = lws_cluster()
    queues(c, gpus=6)
    lws = _surging_set(c, 1)
    assert _reserved(c.group_workload(lws, 2))[0] == "True"
    assert gates(c.pod("a-2")) == []
    assert gates(c.pod("a-2-1")) == []
    assert c.used_gpus() == 6
    # The rollout is over: every group updated, the surge group's pods gone, its Workload deleted.
    c.api.change(LEADERWORKERSETS, "ns", "a", {"status": {"replicas": 2, "updatedReplicas": 2}})
    for name in ("a-2", "a-2-1"):
        c.api.delete(PODS, "ns", name)
    c.settle()
    assert c.group_workload(lws, 2) is None
    assert c.group_workload(lws, 0) is not None
    assert c.used_gpus() == 4


def test_a_percentage_max_surge_reads_as_zero_no_surge_workload() -> None:
    c = lws_cluster()
    queues(c, gpus=6)
    lws = _surging_set(c, "50%")
    assert c.group_workload(lws, 2) is None
    assert gates(c.pod("a-2")) == [ADMISSION_GATE, TOPOLOGY_GATE]


def test_a_new_image_keeps_each_groups_workload_and_its_pods_remade_are_ungated_under_it() -> None:
    """Kueue compares a group with its prebuilt Workload by its pod group rule (pod set names and
    counts), not by templates: rolled to a new image, the group keeps its admitted Workload."""
    c = lws_cluster()
    queues(c, gpus=2)
    lws = c.add_set("a")
    c.settle()
    before = c.group_workload(lws, 0)
    assert before is not None
    template = copy.deepcopy(lws["spec"]["leaderWorkerTemplate"])
    for role in ("leaderTemplate", "workerTemplate"):
        template[role]["spec"]["containers"][0]["image"] = "busybox:1.36"
    c.api.change(LEADERWORKERSETS, "ns", "a", {"spec": {"leaderWorkerTemplate": template}})
    assert c.api.get(LEADERWORKERSETS, "ns", "a")["metadata"]["generation"] == 2
    performed = c.settle()
    assert not [a for a in performed if a.purpose in ("delete-workload", "job-delete", "job-terminate")]
    # The LWS controller remakes the group at the new revision: ungated under the same Workload.
    for name in ("a-0", "a-0-1"):
        c.api.delete(PODS, "ns", name)
    c.add_group(c.api.get(LEADERWORKERSETS, "ns", "a"), 0)
    c.settle()
    after = c.group_workload(lws, 0)
    assert after is not None
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert _reserved(after)[0] == "True"
    assert gates(c.pod("a-0")) == []
    assert c.pod("a-0")["spec"]["containers"][0]["image"] == "busybox:1.36"
    assert c.used_gpus() == 2
