"""Whether a job still matches its Workload, as Kueue's EquivalentToWorkload decides."""

from __future__ import annotations

from typing import Any

import msgspec
from reconciler.api import Job
from reconciler.api import ObjectMeta
from reconciler.api import PodSet
from reconciler.api import Workload
from reconciler.api import WorkloadSpec
from reconciler.integrations import BATCH_JOB
from reconciler.integrations import Known
from reconciler.integrations import PodSetStart
from reconciler.integrations import Suspend
from reconciler.integrations import decide
from reconciler.integrations import equivalent


def decode_job(body: dict[str, Any]) -> Job:
    job: Job = msgspec.json.decode(msgspec.json.encode(body), type=Job)
    return job


def pod_set(
    count: int = 1, *, image: str = "busybox", tolerations: list[Any] | None = None, **extra: Any
) -> PodSet:
    container = {"name": "c", "image": image, **extra}
    spec: dict[str, Any] = {"containers": [container]}
    if tolerations:
        spec["tolerations"] = tolerations
    return PodSet(name="main", template=msgspec.Raw(msgspec.json.encode({"spec": spec})), count=count)


def test_counts_and_containers_decide() -> None:
    assert equivalent([pod_set()], [pod_set()], admitted=False)
    assert not equivalent([pod_set(3)], [pod_set()], admitted=True)
    assert not equivalent([pod_set(image="other")], [pod_set()], admitted=True)
    assert not equivalent([pod_set(), pod_set()], [pod_set()], admitted=False)


def test_tolerations_count_only_before_admission() -> None:
    toleration = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert not equivalent([pod_set(tolerations=toleration)], [pod_set()], admitted=False)
    assert equivalent([pod_set(tolerations=toleration)], [pod_set()], admitted=True)


def test_a_field_the_workload_copy_lacks_is_no_difference() -> None:
    # The Workload CRD may prune a container field it does not know; what it recorded must match.
    assert equivalent([pod_set(newField="x")], [pod_set()], admitted=False)
    assert not equivalent([pod_set()], [pod_set(newField="x")], admitted=False)


def test_an_evicted_job_still_carrying_its_flavor_tolerations_is_only_suspended() -> None:
    toleration = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
    job = decode_job(
        {
            "metadata": {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {
                "suspend": False,
                "template": {
                    "metadata": {"labels": {"kueue.x-k8s.io/podset": "main"}},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}], "tolerations": toleration},
                },
            },
        }
    )
    recorded = PodSet(
        name="main",
        template=msgspec.Raw(b'{"spec":{"containers":[{"name":"c","image":"busybox"}]}}'),
        count=1,
    )
    workload = Workload(metadata=ObjectMeta(name="w", namespace="ns"), spec=WorkloadSpec(pod_sets=[recorded]))
    step = decide(BATCH_JOB, job, workload, Known(admitted=False), {})
    assert isinstance(step, Suspend)


def test_the_job_start_patch_carries_its_pod_sets_labels_and_annotations() -> None:
    job = decode_job({"metadata": {"name": "j"}, "spec": {"template": {"spec": {"containers": []}}}})
    start = PodSetStart("main", {"pool": "gpu"}, (), {"kueue.x-k8s.io/podset": "main"}, {"note": "x"})
    patch = msgspec.json.decode(BATCH_JOB.start_patch(job, [start]))
    assert patch["spec"]["template"] == {
        "spec": {"nodeSelector": {"pool": "gpu"}},
        "metadata": {"labels": {"kueue.x-k8s.io/podset": "main"}, "annotations": {"note": "x"}},
    }
