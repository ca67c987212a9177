"""The device inventory in the reconciler: watch events of classes, slices and nodes in, decisions out."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import ClusterQueue, DeviceClass, ResourceClaimTemplate
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    DEVICE_CLASSES,
    NODES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_SLICES,
)
from reconciler.api.slices import Node, ResourceSlice
from reconciler.core.model.workloads import DEVICE_CHARGES_ANNOTATION
from reconciler.kube import WatchEvent
from reconciler.runtime.loop.reconciler import ALL_WATCHED, WATCHED
from reconciler.runtime.shared.actions import PostEvent
from reconciler.runtime.shared.writer import WriteDone
from tests.support.builders import cluster_queue_body
from tests.support.inventory_harness import enforcing
from tests.support.reconciler_harness import (
    Harness,
    apply_patch,
    decode,
    gpu_job,
    of,
    queues,
    submitted,
)

DRIVER = "gpu.nvidia.com"


def devices(h: Harness, gpus: int) -> None:
    h.event("ADDED", NODES, decode({"metadata": {"name": "node-1", "labels": {"gpu": "t4"}}}, Node))
    selector = f'device.driver == "{DRIVER}"'
    body: dict[str, Any] = {
        "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": selector}}]},
    }
    h.event("ADDED", DEVICE_CLASSES, decode(body, DeviceClass))
    slice_body = {
        "metadata": {"name": "node-1-gpu"},
        "spec": {
            "driver": DRIVER,
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}"} for i in range(gpus)],
        },
    }
    h.event("ADDED", RESOURCE_SLICES, decode(slice_body, ResourceSlice))


def sync(h: Harness) -> None:
    for resource in h.reconciler.watched:
        h.reconciler.handle(WatchEvent("SYNCED", resource, ("", ""), None))


def submit(h: Harness, name: str) -> None:
    submitted(h, gpu_job(h, name))


def test_the_inventory_kinds_are_watched_only_when_the_mode_is_on() -> None:
    assert Harness().reconciler.watched == WATCHED
    assert enforcing("Report").reconciler.watched == ALL_WATCHED
    h = enforcing()
    queues(h, gpus=4)
    for resource in WATCHED:
        h.reconciler.handle(WatchEvent("SYNCED", resource, ("", ""), None))
    assert not h.reconciler.ready  # DeviceClasses, ResourceSlices and Nodes not listed yet


def test_enforce_admits_while_devices_are_free_and_says_why_the_third_waits() -> None:
    h = enforcing()
    queues(h, gpus=4)
    devices(h, 2)
    sync(h)
    assert h.reconciler.ready
    admitted = []
    pending = []
    for name in ("a", "b", "c"):
        submit(h, name)
        actions = h.take()
        admitted += of(actions, "admit")
        pending += of(actions, "workload-status")
    assert len(admitted) == 2
    (waiting,) = pending
    conditions = msgspec.json.decode(waiting.patch)["status"]["conditions"]
    reserved = next(c for c in conditions if c["type"] == "QuotaReserved")
    assert reserved["message"] == (
        "couldn't assign flavors to pod set main: insufficient devices for nvidia.com/gpu in flavor t4: "
        "DeviceClass gpu.nvidia.com needs 1, 0 available (2 published on the flavor's nodes)"
    )
    # A third GPU is published: the waiting workload is admitted.
    devices(h, 3)
    assert len(of(h.take(), "admit")) == 1


def cq_condition(h: Harness) -> dict[str, Any]:
    h.reconciler.flush_status()
    patches = of(h.actions, "cq-status")
    h.actions.clear()
    assert patches
    conditions = msgspec.json.decode(patches[-1].patch)["status"]["conditions"]
    found: dict[str, Any] = next(c for c in conditions if c["type"] == "DevicesCoverQuota")
    return found


def test_report_mode_shows_quota_over_the_devices_without_holding_admission() -> None:
    h = enforcing("Report")
    queues(h, gpus=4)
    devices(h, 2)
    sync(h)
    for name in ("a", "b", "c"):
        submit(h, name)
        assert len(of(h.take(), "admit")) == 1
    condition = cq_condition(h)
    assert (condition["status"], condition["reason"]) == ("False", "QuotaExceedsDevices")
    sample = h.reconciler.inventory.sample()
    assert sample is not None
    assert sample.devices == {("t4", "gpu.nvidia.com"): (2, 0)}
    assert sample.quota_over == {("cq", "t4", "nvidia.com/gpu"): 2.0}


def test_a_mapped_class_that_does_not_exist_gets_an_event_and_the_condition() -> None:
    h = enforcing("Report", classes=("gpu.nvidia.com", "missing.example.com"))
    queues(h, gpus=1)
    devices(h, 2)
    sync(h)
    events = [msgspec.json.decode(a.body) for a in h.take() if isinstance(a, PostEvent)]
    h.reconciler.inventory.changed()
    assert not [a for a in h.take() if isinstance(a, PostEvent)]  # said once
    (event,) = [e for e in events if e["reason"] == "DeviceClassNotFound"]
    assert event["involvedObject"]["kind"] == "ClusterQueue"
    assert event["type"] == "Warning"
    assert "DeviceClass missing.example.com is mapped to nvidia.com/gpu" in event["message"]
    condition = cq_condition(h)
    assert (condition["status"], condition["reason"]) == ("False", "DeviceClassNotFound")
    sample = h.reconciler.inventory.sample()
    assert sample is not None
    assert ("missing.example.com", "not_found") in sample.mapping_problems


def test_off_writes_no_inventory_condition() -> None:
    h = Harness()
    queues(h, gpus=4)
    h.sync_all()
    h.take()
    h.reconciler.flush_status()
    patches = of(h.actions, "cq-status")
    conditions = msgspec.json.decode(patches[-1].patch)["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Active"]
    assert h.reconciler.inventory.sample() is None


def test_a_changed_mapping_is_counted_again_without_an_event() -> None:
    h = enforcing("Report")
    queues(h, gpus=1)
    devices(h, 2)
    sync(h)
    h.take()
    before = h.reconciler.ctx.device_inventory
    assert before is not None
    assert before.missing_classes == ()
    # As a live reload of deviceClassMappings would swap it.
    h.reconciler.ctx.config = enforcing(
        "Report", classes=("gpu.nvidia.com", "new.example.com")
    ).reconciler.ctx.config
    h.take()
    after = h.reconciler.ctx.device_inventory
    assert after is not None
    assert after.missing_classes == ("new.example.com",)


def test_a_cluster_queue_made_after_the_count_is_told_of_a_missing_class() -> None:
    h = enforcing("Report", classes=("gpu.nvidia.com", "missing.example.com"))
    queues(h, gpus=1)
    devices(h, 1)
    sync(h)
    h.take()  # told once, for cq
    h.event(
        "ADDED",
        CLUSTER_QUEUES,
        decode(cluster_queue_body("cq2", [("t4", {"nvidia.com/gpu": 1})]), ClusterQueue),
    )
    events = [msgspec.json.decode(a.body) for a in h.take() if isinstance(a, PostEvent)]
    assert [e["involvedObject"]["name"] for e in events if e["reason"] == "DeviceClassNotFound"] == ["cq2"]


def test_a_template_asking_for_an_unmapped_class_gets_an_event() -> None:
    h = enforcing("Report")
    queues(h, gpus=1)
    devices(h, 1)
    sync(h)
    h.take()
    body = {
        "metadata": {"name": "fpga", "namespace": "ns"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "f", "exactly": {"deviceClassName": "fpga.example.com"}}]}
            }
        },
    }
    h.event("ADDED", RESOURCE_CLAIM_TEMPLATES, decode(body, ResourceClaimTemplate))
    events = [msgspec.json.decode(a.body) for a in h.take() if isinstance(a, PostEvent)]
    (event,) = [e for e in events if e["reason"] == "DeviceClassNotMapped"]
    assert event["involvedObject"] == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "name": "fpga",
        "namespace": "ns",
        "uid": "",
    }
    assert event["message"].startswith(
        "spec.spec.devices.requests[0].exactly.deviceClassName: DeviceClass fpga.example.com"
    )
    sample = h.reconciler.inventory.sample()
    assert sample is not None
    assert ("fpga.example.com", "unmapped") in sample.mapping_problems


def all_gpus_template(h: Harness) -> None:
    body = {
        "metadata": {"name": "gpu", "namespace": "ns"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "g", "exactly": {"deviceClassName": DRIVER, "allocationMode": "All"}}
                    ]
                }
            }
        },
    }
    h.event("MODIFIED", RESOURCE_CLAIM_TEMPLATES, decode(body, ResourceClaimTemplate))


def test_all_devices_are_charged_from_the_inventory_and_recorded_once_admitted() -> None:
    h = enforcing("Report")
    queues(h, gpus=3)
    all_gpus_template(h)
    devices(h, 2)
    sync(h)
    workload = submitted(h, gpu_job(h, "a"))
    (admit,) = of(h.take(), "admit")
    (assignment,) = msgspec.json.decode(admit.patch)["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"nvidia.com/gpu": "2"}  # both GPUs of node-1
    admitted = apply_patch(h, workload, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    (annotate,) = of(h.take(), "workload-annotate")
    assert msgspec.json.decode(annotate.patch) == {
        "metadata": {
            "annotations": {
                DEVICE_CHARGES_ANNOTATION: "podset main, claim g, request g: 2 device(s) of DeviceClass "
                "gpu.nvidia.com (allocationMode All: the most on one node of flavor t4) charged as 2 "
                "nvidia.com/gpu"
            }
        }
    }
    submit(h, "b")
    (waiting,) = of(h.take(), "workload-status")
    conditions = msgspec.json.decode(waiting.patch)["status"]["conditions"]
    reserved = next(c for c in conditions if c["type"] == "QuotaReserved")
    assert reserved["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor t4, "
        "1 more needed"
    )
    # The node now publishes one GPU: the waiting workload is charged 1 and admitted; the admitted
    # one keeps its charge of 2 (status.admission is its record).
    devices(h, 1)
    (admit_b,) = of(h.take(), "admit")
    (assignment,) = msgspec.json.decode(admit_b.patch)["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"nvidia.com/gpu": "1"}
    assert h.reconciler.ctx.engine.ledger.used("cq", ("t4", "nvidia.com/gpu")) == 3
