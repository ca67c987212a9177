"""AppWrappers through the runtime with the in-memory API: an AppWrapper wrapping a Job of 2 pods
(each a GPU from a ResourceClaimTemplate) admitted as one Workload, charged through
deviceClassMappings, started with its pod set's flavor in podSetInfos, while a second waits with
Kueue's message; the Job the AppWrapper controller makes is never admitted on its own; the first
finished from its phase frees the quota for the second; a PodsReady timeout suspends an
AppWrapper and clears its podSetInfos."""

from __future__ import annotations

import dataclasses

from reconciler.api.appwrapper import APPWRAPPERS
from reconciler.api.resources import JOBS
from reconciler.config import parse_config
from reconciler.integrations import PODSET_LABEL
from tests.support.appwrappers import appwrapper_body
from tests.support.builders import job_body
from tests.support.jobset_queues import condition, queues
from tests.support.memory_cluster import GPU, T0, Cluster

CONFIG = dataclasses.replace(
    parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "waitForPodsReady": {"timeout": "60s", "requeuingStrategy": {"backoffBaseSeconds": 10}},
            "integrations": {"frameworks": ["batch/job", "workload.codeflare.dev/appwrapper"]},
            "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
        }
    ),
)
WAITING = (
    "couldn't assign flavors to pod set second-0: insufficient unused quota for nvidia.com/gpu "
    "in flavor t4, 2 more needed"
)


def _child_job(c: Cluster, aw: str, *, suspend: bool = False) -> None:
    """The Job the AppWrapper controller makes from the component: controlled by the AppWrapper."""
    owner = c.api.get(APPWRAPPERS, "ns", aw)
    body = job_body(f"{aw}-job", queue=None, parallelism=2, completions=2)
    body["spec"]["suspend"] = suspend
    body["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "workload.codeflare.dev/v1beta2",
            "kind": "AppWrapper",
            "name": aw,
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
    ]
    c.api.add(JOBS, body)


def test_two_appwrappers_one_admitted_the_other_waits_then_runs_when_the_first_succeeds() -> None:
    c = Cluster(CONFIG)
    queues(c, gpus=2)
    c.api.add(APPWRAPPERS, appwrapper_body("first"))
    c.settle()
    first = c.workloads()["AppWrapper/first"]
    assert [(ps["name"], ps["count"]) for ps in first["spec"]["podSets"]] == [("first-0", 2)]
    (usage,) = [a["resourceUsage"] for a in first["status"]["admission"]["podSetAssignments"]]
    assert usage[GPU] == "2"
    assert c.used_gpus() == 2
    started = c.api.get(APPWRAPPERS, "ns", "first")
    assert started["spec"]["suspend"] is False
    (info,) = started["spec"]["components"][0]["podSetInfos"]
    assert info["nodeSelector"] == {"gpu": "t4"}
    assert info["labels"][PODSET_LABEL] == "first-0"
    assert c.api.reasons("AppWrapper", "first") == ["CreatedWorkload", "Started"]
    # The AppWrapper controller makes its Job: its parent's, no Workload of its own, not suspended.
    _child_job(c, "first")
    c.settle()
    assert sorted(c.workloads()) == ["AppWrapper/first"]
    assert c.api.get(JOBS, "ns", "first-job")["spec"]["suspend"] is False
    c.api.add(APPWRAPPERS, appwrapper_body("second"))
    c.settle()
    reserved = condition(c.workloads()["AppWrapper/second"], "QuotaReserved")
    assert reserved is not None
    assert (reserved["status"], reserved["message"]) == ("False", WAITING)
    assert c.api.get(APPWRAPPERS, "ns", "second")["spec"]["suspend"] is True
    c.api.change(APPWRAPPERS, "ns", "first", {"status": {"phase": "Succeeded"}})
    c.settle()
    finished = condition(c.workloads()["AppWrapper/first"], "Finished")
    assert finished is not None
    assert (finished["reason"], finished["message"]) == ("Succeeded", "AppWrapper finished successfully")
    assert c.api.get(APPWRAPPERS, "ns", "second")["spec"]["suspend"] is False
    assert c.used_gpus() == 2


def test_an_appwrappers_job_is_suspended_while_the_appwrapper_is_not_admitted() -> None:
    c = Cluster(CONFIG)
    queues(c, gpus=0)
    c.api.add(APPWRAPPERS, appwrapper_body("aw"))
    c.settle()
    _child_job(c, "aw")
    c.settle()
    assert c.api.get(JOBS, "ns", "aw-job")["spec"]["suspend"] is True
    assert sorted(c.workloads()) == ["AppWrapper/aw"]


def test_a_pods_ready_timeout_suspends_the_appwrapper_and_clears_its_pod_set_infos() -> None:
    c = Cluster(CONFIG)
    queues(c, gpus=2)
    body = appwrapper_body("aw")
    c.api.add(APPWRAPPERS, body)
    c.settle()
    assert c.api.get(APPWRAPPERS, "ns", "aw")["spec"]["components"][0]["podSetInfos"]
    c.tick(T0 + 61)
    evicted = condition(c.workloads()["AppWrapper/aw"], "Evicted")
    assert evicted is not None
    assert evicted["reason"] == "PodsReadyTimeout"
    stopped = c.api.get(APPWRAPPERS, "ns", "aw")
    assert stopped["spec"]["suspend"] is True
    assert stopped["spec"]["components"] == body["spec"]["components"]
    assert c.used_gpus() == 0
