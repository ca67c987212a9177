"""The webhooks' rules as pure functions: Kueue's defaulting and validation, worded as Kueue words it."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
import pytest

from reconciler.admission.fielderrors import (
    FieldError,
    aggregate,
    duplicate,
    invalid,
    not_supported,
    required,
)
from reconciler.admission.queue_rules import JobPolicy, validate_job, validate_job_update
from reconciler.api import ClusterQueue, Job, LocalQueue, ResourceFlavor, Workload
from reconciler.integrations.batchjob import default_job
from reconciler.webhook.clusterqueues import validate_cluster_queue
from reconciler.webhook.flavors import validate_resource_flavor
from reconciler.webhook.localqueues import validate_local_queue, validate_local_queue_update
from reconciler.webhook.workloads import validate_workload, validate_workload_update
from tests.support.builders import job_body

QUEUE = "kueue.x-k8s.io/queue-name"
T = TypeVar("T")


def convert(body: dict[str, Any], kind: type[T]) -> T:
    return msgspec.json.decode(msgspec.json.encode(body), type=kind)


def messages(errors: list[FieldError]) -> list[str]:
    return [str(e) for e in errors]


# --- field errors ---------------------------------------------------------------------------------


def test_field_errors_read_as_apimachinery_writes_them() -> None:
    assert str(invalid("spec.x", "-1", "must be greater than or equal to 0")) == (
        'spec.x: Invalid value: "-1": must be greater than or equal to 0'
    )
    assert str(invalid("spec.n", 3, "too big")) == "spec.n: Invalid value: 3: too big"
    assert str(required("spec.y")) == "spec.y: Required value"
    assert str(duplicate("spec.z", "cpu")) == 'spec.z: Duplicate value: "cpu"'
    assert str(not_supported("spec.op", "Maybe", ["In", "NotIn"])) == (
        'spec.op: Unsupported value: "Maybe": supported values: "In", "NotIn"'
    )
    one, two = invalid("a", 1, "x"), required("b")
    assert aggregate([one]) == "a: Invalid value: 1: x"
    assert aggregate([one, two, one]) == "[a: Invalid value: 1: x, b: Required value]"
    assert (one.reason, two.reason, not_supported("c", "", []).reason) == (
        "FieldValueInvalid",
        "FieldValueRequired",
        "FieldValueNotSupported",
    )


# --- Jobs -----------------------------------------------------------------------------------------


def job(queue: str | None = "lq", suspend: bool | None = None, **labels: str) -> Job:
    body = job_body("j", queue=queue)
    body["metadata"]["labels"].update(labels)
    del body["spec"]["suspend"]
    if suspend is not None:
        body["spec"]["suspend"] = suspend
    return convert(body, Job)


def test_a_queue_labelled_job_is_suspended() -> None:
    ops = default_job(job(suspend=False), JobPolicy(), default_queue_exists=False)
    assert ops == [{"op": "add", "path": "/spec/suspend", "value": True}]
    assert default_job(job(suspend=None), JobPolicy(), default_queue_exists=False) == ops


def test_a_suspended_or_unmanaged_job_is_left_alone() -> None:
    assert default_job(job(suspend=True), JobPolicy(), default_queue_exists=False) == []
    assert default_job(job(queue=None), JobPolicy(), default_queue_exists=False) == []
    assert default_job(job(suspend=False), JobPolicy(frameworks=frozenset()), default_queue_exists=True) == []


def test_manage_jobs_without_queue_name_suspends_every_job() -> None:
    policy = JobPolicy(manage_without_queue_name=True)
    assert default_job(job(queue=None), policy, default_queue_exists=False) == [
        {"op": "add", "path": "/spec/suspend", "value": True}
    ]


def test_the_default_local_queue_is_set_when_it_exists() -> None:
    body = {**job_body("j", queue=None), "metadata": {"name": "j", "namespace": "ns"}}
    del body["spec"]["suspend"]
    no_labels = convert(body, Job)
    assert default_job(no_labels, JobPolicy(), default_queue_exists=True) == [
        {"op": "add", "path": "/metadata/labels", "value": {QUEUE: "default"}},
        {"op": "add", "path": "/spec/suspend", "value": True},
    ]
    other_labels = job(queue=None, team="a")
    assert default_job(other_labels, JobPolicy(), default_queue_exists=True)[0] == {
        "op": "add",
        "path": "/metadata/labels/kueue.x-k8s.io~1queue-name",
        "value": "default",
    }
    # A queue name given is kept.
    assert default_job(job(queue="mine", suspend=True), JobPolicy(), default_queue_exists=True) == []


def test_job_validation() -> None:
    assert validate_job(job(queue="team-a")) == []
    (error,) = validate_job(job(queue="Team_A"))
    assert str(error).startswith(
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "Team_A": a lowercase RFC 1123 subdomain'
    )
    bad_time = job("lq", None, **{"kueue.x-k8s.io/max-exec-time-seconds": "0"})
    assert messages(validate_job(bad_time)) == [
        "metadata.labels[kueue.x-k8s.io/max-exec-time-seconds]: Invalid value: 0: should be greater than 0"
    ]


def test_the_queue_name_cannot_change_while_the_job_runs() -> None:
    running_old, running_new = job(queue="a", suspend=False), job(queue="b", suspend=False)
    assert messages(validate_job_update(running_new, running_old)) == [
        'metadata.labels[kueue.x-k8s.io/queue-name]: Invalid value: "b": field is immutable'
    ]
    assert validate_job_update(job(queue="b", suspend=True), job(queue="a", suspend=True)) == []


# --- ClusterQueues --------------------------------------------------------------------------------


def cluster_queue(*groups: dict[str, Any], cohort: str | None = None, **spec: Any) -> ClusterQueue:
    body: dict[str, Any] = {"metadata": {"name": "cq"}, "spec": {"resourceGroups": list(groups), **spec}}
    if cohort:
        body["spec"]["cohortName"] = cohort
    return convert(body, ClusterQueue)


def group(covered: list[str], *flavors: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {"coveredResources": covered, "flavors": [{"name": n, "resources": r} for n, r in flavors]}


def quota(name: str, nominal: str | int, **limits: str) -> dict[str, Any]:
    return {"name": name, "nominalQuota": nominal, **limits}


GPU = "nvidia.com/gpu"


def test_a_good_cluster_queue_passes() -> None:
    cq = cluster_queue(group(["cpu", GPU], ("t4", [quota("cpu", "8"), quota(GPU, 2)])))
    assert validate_cluster_queue(cq) == []


def test_the_admission_mode_is_one_of_kueues_two() -> None:
    gpus = group([GPU], ("t4", [quota(GPU, 2)]))
    for mode in ("UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"):
        assert validate_cluster_queue(cluster_queue(gpus, admissionScope={"admissionMode": mode})) == []
    bad = cluster_queue(gpus, admissionScope={"admissionMode": "UsageBased"})
    assert messages(validate_cluster_queue(bad)) == [
        'spec.admissionScope.admissionMode: Unsupported value: "UsageBased": supported values: '
        '"UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"'
    ]


def test_negative_quota_is_refused_with_the_field_named() -> None:
    cq = cluster_queue(group([GPU], ("t4", [quota(GPU, "-1")])))
    assert messages(validate_cluster_queue(cq)) == [
        'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-1": '
        "must be greater than or equal to 0"
    ]


def test_limits_need_a_cohort_and_lending_stays_within_nominal() -> None:
    alone = cluster_queue(group([GPU], ("t4", [quota(GPU, 2, borrowingLimit="1", lendingLimit="3")])))
    where = "spec.resourceGroups[0].flavors[0].resources[0]"
    assert messages(validate_cluster_queue(alone)) == [
        f'{where}.borrowingLimit: Invalid value: "1": must be nil when cohort is empty',
        f'{where}.lendingLimit: Invalid value: "3": must be nil when cohort is empty',
        f'{where}.lendingLimit: Invalid value: "3": must be less than or equal to the nominalQuota',
    ]
    shared = cluster_queue(group([GPU], ("t4", [quota(GPU, 2, lendingLimit="2")])), cohort="all")
    assert validate_cluster_queue(shared) == []


def test_resource_groups_are_checked_as_kueue_does() -> None:
    cq = cluster_queue(
        group(["cpu"], ("a", [quota("cpu", 1)])),
        group(["cpu", "bad name!"], ("a", [quota("memory", 1), quota("bad name!", 1)])),
    )
    found = messages(validate_cluster_queue(cq))
    assert 'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"' in found
    assert any(
        m.startswith('spec.resourceGroups[1].coveredResources[1]: Invalid value: "bad name!"') for m in found
    )
    assert (
        'spec.resourceGroups[1].flavors[0].resources[0].name: Invalid value: "memory": '
        "must match the name in coveredResources"
    ) in found
    assert 'spec.resourceGroups[1].flavors[0].name: Duplicate value: "a"' in found


def test_too_many_flavors_are_refused() -> None:
    flavors = [(f"f{i}", [quota("cpu", 1)]) for i in range(257)]
    (error,) = validate_cluster_queue(cluster_queue(group(["cpu"], *flavors)))
    assert str(error) == (
        "spec.resourceGroups: Invalid value: 257: total number of flavors across all resourceGroups "
        "must be ≤ 256, got 257"
    )


def test_a_bad_namespace_selector_is_refused() -> None:
    selector = {"matchExpressions": [{"key": "team", "operator": "In"}]}
    cq = cluster_queue(group(["cpu"], ("a", [quota("cpu", 1)])), namespaceSelector=selector)
    assert messages(validate_cluster_queue(cq)) == [
        "spec.namespaceSelector.matchExpressions[0].values: Required value: "
        "must be specified when `operator` is 'In' or 'NotIn'"
    ]


def test_what_the_controller_cannot_compile_is_refused_too() -> None:
    cq = cluster_queue(group(["cpu"], ("a", [quota("cpu", "lots")])))
    (error,) = validate_cluster_queue(cq)
    assert error.field == "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    assert "quantities must match" in str(error)


# --- LocalQueues, ResourceFlavors ---------------------------------------------------------------


def local_queue(cluster_queue: str, **spec: Any) -> LocalQueue:
    return convert({"metadata": {"name": "lq"}, "spec": {"clusterQueue": cluster_queue, **spec}}, LocalQueue)


def test_local_queue_rules() -> None:
    assert validate_local_queue(local_queue("cq")) == []
    (error,) = validate_local_queue(local_queue("CQ"))
    assert str(error).startswith('spec.clusterQueue: Invalid value: "CQ": a lowercase RFC 1123 subdomain')
    assert messages(validate_local_queue_update(local_queue("b"), local_queue("a"))) == [
        'spec.clusterQueue: Invalid value: "b": field is immutable'
    ]


def test_a_local_queues_stop_policy_is_one_of_kueues_three() -> None:
    """A LocalQueue's stopPolicy is one of Kueue's three (the webhook refuses any other)."""
    for policy in ("None", "Hold", "HoldAndDrain"):
        assert validate_local_queue(local_queue("cq", stopPolicy=policy)) == []
    (error,) = validate_local_queue(local_queue("cq", stopPolicy="Drain"))
    assert str(error).startswith('spec.stopPolicy: Unsupported value: "Drain": supported values: ')


def flavor(**spec: Any) -> ResourceFlavor:
    return convert({"metadata": {"name": "f"}, "spec": spec}, ResourceFlavor)


def test_resource_flavor_rules() -> None:
    assert validate_resource_flavor(flavor(nodeLabels={"nvidia.com/gpu.product": "Tesla-T4"})) == []
    # Word for word as Kueue v0.18.1 answered (conformance scenario webhook-rejections),
    # apimachinery's two spaces before each "or" included.
    assert messages(validate_resource_flavor(flavor(nodeLabels={"gpu": "Tesla T4"}))) == [
        'spec.nodeLabels: Invalid value: "Tesla T4": a valid label must be an empty string or consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    ]
    taints = [{"key": "gpu", "effect": "NoSchedule"}, {"key": "gpu", "value": "x", "effect": "NoSchedule"}]
    assert messages(validate_resource_flavor(flavor(nodeTaints=taints))) == [
        'spec.nodeTaints[1]: Duplicate value: {"effect":"NoSchedule","key":"gpu","value":"x"}: '
        "taints must be unique by key and effect pair"
    ]
    tolerations = [{"operator": "Equal", "value": "x"}, {"key": "a", "operator": "Exists", "value": "v"}]
    found = messages(validate_resource_flavor(flavor(tolerations=tolerations)))
    assert found[0].startswith(
        'spec.tolerations[0].operator: Invalid value: "Equal": operator must be Exists'
    )
    assert found[1] == (
        "spec.tolerations[1].value: Invalid value: \"v\": a value must be empty when 'operator' is 'Exists'"
    )


# --- Workloads ------------------------------------------------------------------------------------


def pod_set(
    name: str = "main", count: int = 1, requests: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if requests is not None:
        container["resources"] = {"requests": requests}
    return {"name": name, "count": count, "template": {"spec": {"containers": [container]}}, **extra}


def workload(*pod_sets: dict[str, Any], queue: str = "lq", reserved: bool = False, **status: Any) -> Workload:
    body: dict[str, Any] = {
        "metadata": {"name": "wl", "namespace": "ns"},
        "spec": {"podSets": list(pod_sets), "queueName": queue},
        "status": dict(status),
    }
    if reserved:
        body["status"]["conditions"] = [
            {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "message": ""}
        ]
    return convert(body, Workload)


def test_a_good_workload_passes() -> None:
    assert validate_workload(workload(pod_set(requests={"cpu": "1", GPU: 1}))) == []


@pytest.mark.parametrize(
    ("pod_sets", "expected"),
    [
        ([pod_set("Main")], 'spec.podSets[0].name: Invalid value: "Main": a lowercase RFC 1123 label'),
        ([pod_set("a"), pod_set("a")], 'spec.podSets[1].name: Duplicate value: "a"'),
        ([pod_set(minCount=3, count=2)], "spec.podSets[0].minCount: Invalid value: 3: minCount should be"),
        (
            [pod_set(requests={"cpu": "-1"})],
            'spec.podSets[0].template.spec.containers[0].resources.requests[cpu]: Invalid value: "-1": '
            "must be greater than or equal to 0",
        ),
        (
            [pod_set(requests={"memory": "lots"})],
            'spec.podSets[0].template.spec.containers[0].resources.requests[memory]: Invalid value: "lots": '
            "quantities must match",
        ),
        (
            [pod_set(requests={"pods": "1"})],
            "spec.podSets[0].template.spec.containers[0].resources.requests[pods]: Invalid value: "
            '"pods": the key is reserved for internal kueue use',
        ),
        ([{"name": "main", "template": {"spec": {}}}], "spec.podSets[0].template.spec.containers: Required"),
        ([{"name": "main", "template": {}}], "spec.podSets[0].template.spec: Required value"),
        ([], "spec.podSets: Required value"),
        ([pod_set(f"p{i}") for i in range(19)], "spec.podSets: Too many: 19: must have at most 18 items"),
    ],
)
def test_malformed_pod_sets_are_refused_with_the_field_named(
    pod_sets: list[dict[str, Any]], expected: str
) -> None:
    found = messages(validate_workload(workload(*pod_sets)))
    assert any(m.startswith(expected) for m in found), found


def test_an_admission_must_match_the_pod_sets() -> None:
    admission = {
        "clusterQueue": "cq",
        "podSetAssignments": [{"name": "other", "count": 2, "resourceUsage": {GPU: "3"}}],
    }
    found = messages(validate_workload(workload(pod_set(), reserved=True, admission=admission)))
    assert found == [
        'status.admission.podSetAssignments[0].name: Not found: "other"',
        'status.admission.podSetAssignments[0].resourceUsage[nvidia.com/gpu]: Invalid value: "3": '
        "is not a multiple of 2",
    ]


def test_what_cannot_change_while_quota_is_reserved() -> None:
    old = workload(pod_set(requests={"cpu": "1"}), queue="a", reserved=True)
    new = workload(pod_set(requests={"cpu": "2"}), queue="b", reserved=True)
    assert messages(validate_workload_update(new, old)) == [
        'spec.podSets[0]: Invalid value: "main": field is immutable',
        'spec.queueName: Invalid value: "b": queueName is immutable while workload quota reserved',
    ]
    # Not reserved: anything goes.
    assert validate_workload_update(workload(pod_set(), queue="b"), workload(pod_set(), queue="a")) == []


def test_an_admission_is_set_or_cleared_but_never_changed() -> None:
    first = {"clusterQueue": "cq", "podSetAssignments": [{"name": "main", "count": 1}]}
    second = {"clusterQueue": "other", "podSetAssignments": [{"name": "main", "count": 1}]}
    reserved = workload(pod_set(), reserved=True, admission=first)
    assert validate_workload_update(reserved, workload(pod_set())) == []  # set
    assert validate_workload_update(workload(pod_set()), reserved) == []  # cleared
    moved = workload(pod_set(), reserved=True, admission=second)
    assert messages(validate_workload_update(moved, reserved)) == [
        'status.admission: Invalid value: "other": field is immutable'
    ]


def test_new_queues_and_flavors_get_the_in_use_finalizer() -> None:
    from reconciler.webhook.inuse import add_in_use_finalizer

    bare = cluster_queue(group(["cpu"], ("a", [quota("cpu", 1)])))
    assert add_in_use_finalizer(bare) == [
        {"op": "add", "path": "/metadata/finalizers", "value": ["kueue.x-k8s.io/resource-in-use"]}
    ]
    other = convert({"metadata": {"name": "f", "finalizers": ["example.com/x"]}}, ResourceFlavor)
    assert add_in_use_finalizer(other) == [
        {"op": "add", "path": "/metadata/finalizers/-", "value": "kueue.x-k8s.io/resource-in-use"}
    ]
    done = convert(
        {"metadata": {"name": "f", "finalizers": ["kueue.x-k8s.io/resource-in-use"]}}, ResourceFlavor
    )
    assert add_in_use_finalizer(done) == []


def test_flavor_fungibility_is_validated_as_kueues_webhook_does() -> None:
    gpus = group([GPU], ("t4", [quota(GPU, 2)]))
    both = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    for allowed in (
        {},
        {"whenCanBorrow": "TryNextFlavor"},
        {"whenCanPreempt": "MayStopSearch"},
        {**both, "preference": "PreemptionOverBorrowing"},
        {**both, "preference": "BorrowingOverPreemption"},
    ):
        assert validate_cluster_queue(cluster_queue(gpus, flavorFungibility=allowed)) == []
    half = {**both, "whenCanPreempt": "MayStopSearch", "preference": "PreemptionOverBorrowing"}
    assert messages(validate_cluster_queue(cluster_queue(gpus, flavorFungibility=half))) == [
        'spec.flavorFungibility.preference: Invalid value: "PreemptionOverBorrowing": preference '
        '"PreemptionOverBorrowing" requires both whenCanBorrow and whenCanPreempt to be TryNextFlavor'
    ]
