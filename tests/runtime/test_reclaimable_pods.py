"""Finished pods give their quota back while their job runs (Kueue's ReclaimablePods, beta and
on in v0.18.1): a Job's pods beyond the completions it still needs are written to its Workload's
`status.reclaimablePods`, the admitted Workload is charged less, and a waiting one fits."""

from __future__ import annotations

import msgspec

from reconciler.api import Workload
from reconciler.api.resources import JOBS
from reconciler.core.quota.cache import after_reclaim, charge_from_admission
from reconciler.integrations import BATCH_JOB
from tests.support.builders import job_body
from tests.support.explain_state import decode
from tests.support.memory_cluster import GPU, Cluster, admitted


def _job(name: str, parallelism: int, completions: int) -> dict[str, object]:
    return job_body(
        name,
        parallelism=parallelism,
        completions=completions,
        claims=[{"name": "g", "resourceClaimTemplateName": "gpu"}],
    )


def test_a_jobs_reclaimable_pods_are_kueues() -> None:
    def reclaimable(parallelism: int, completions: int | None, succeeded: int) -> dict[str, int]:
        body = job_body("j", parallelism=parallelism, completions=completions)
        body["status"] = {"succeeded": succeeded}
        return dict(BATCH_JOB.reclaimable_pods(decode(body, BATCH_JOB.projection)))

    assert reclaimable(1, 4, 3) == {}  # a parallelism of 1 never reclaims
    assert reclaimable(3, 6, 0) == {}  # nothing succeeded yet
    assert reclaimable(3, 6, 3) == {}  # 3 remain: all 3 still needed
    assert reclaimable(3, 6, 4) == {"main": 1}  # 2 remain: one pod's quota goes back
    assert reclaimable(3, 6, 5) == {"main": 2}
    assert reclaimable(3, None, 1) == {"main": 1}  # completions default to the parallelism


def test_an_admitted_workload_is_charged_for_the_pods_it_still_needs() -> None:
    workload = decode(
        {
            "metadata": {"name": "w", "namespace": "ns"},
            "spec": {"podSets": [{"name": "main", "count": 4, "template": {}}], "queueName": "lq"},
            "status": {
                "admission": {
                    "clusterQueue": "cq",
                    "podSetAssignments": [
                        {
                            "name": "main",
                            "count": 4,
                            "flavors": {"cpu": "f", GPU: "f"},
                            "resourceUsage": {"cpu": "2", GPU: "4"},
                        }
                    ],
                },
                "reclaimablePods": [{"name": "main", "count": 3}],
            },
        },
        Workload,
    )
    charged = after_reclaim(workload)
    assert charged is not None
    assert charge_from_admission(charged).usage == {("f", "cpu"): 500, ("f", GPU): 1}
    # Without reclaimable pods the admission is the charge, unchanged.
    plain = msgspec.structs.replace(
        workload, status=msgspec.structs.replace(workload.status, reclaimable_pods=[])
    )
    assert after_reclaim(plain) is plain.status.admission


def test_finished_pods_of_a_running_job_free_quota_for_a_waiting_one() -> None:
    c = Cluster()
    c.queues(gpus=3)
    c.api.add(JOBS, _job("wide", parallelism=3, completions=6))
    c.settle()
    assert admitted(c, "wide")
    assert c.used_gpus() == 3
    c.api.add(JOBS, _job("next", parallelism=1, completions=1))
    c.settle()
    assert not admitted(c, "next")
    # Three pods succeed: three remain for three pods, nothing is reclaimable yet.
    c.api.change(JOBS, "ns", "wide", {"status": {"succeeded": 3, "active": 3}})
    c.settle()
    assert "reclaimablePods" not in c.workload("wide")["status"]
    assert not admitted(c, "next")
    # A fourth: two remain for three pods, one pod's quota goes back and "next" fits.
    c.api.change(JOBS, "ns", "wide", {"status": {"succeeded": 4, "active": 2}})
    c.settle()
    assert c.workload("wide")["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]
    assert admitted(c, "next")
    assert c.used_gpus() == 3  # two for "wide", one for "next"
