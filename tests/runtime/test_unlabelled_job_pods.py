"""A managed Job's pod that lacks the pod set label (its controller reference names the Job) is in
the pod index whichever frameworks are on: with the plain-pod integration on, pods reach the
reconciler through the pod-or-job door, which used to index only labelled pods."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.api.resources import PODS
from reconciler.config import Configuration
from tests.support.memory_cluster import CONFIG, Cluster, admitted
from tests.support.pod_queues import CONFIG as POD_CONFIG

JOB_ONLY = dataclasses.replace(CONFIG, frameworks=("batch/job",))


@pytest.mark.parametrize("config", [JOB_ONLY, POD_CONFIG], ids=["job-only", "with-pods"])
def test_a_started_jobs_pod_without_the_pod_set_label_is_indexed(config: Configuration) -> None:
    c = Cluster(config)
    c.queues(gpus=1)
    c.submit("j")
    assert admitted(c, "j")
    job = c.job("j")
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "uid": job["metadata"]["uid"],
        "controller": True,
    }
    pod = {
        "metadata": {"name": "j-1", "namespace": "ns", "labels": {"app": "x"}, "ownerReferences": [owner]},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
        "status": {"phase": "Pending"},
    }
    c.api.add(PODS, pod)
    c.settle()
    index = c.reconciler.ctx.pod_index
    assert ("ns", "j-1") in index.pods
    assert [p.metadata.name for p in index.pods_of(("ns", "j"), "Job")] == ["j-1"]
    c.api.delete(PODS, "ns", "j-1")
    c.settle()
    assert ("ns", "j-1") not in index.pods
