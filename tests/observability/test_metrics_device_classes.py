"""DRA metrics per DeviceClass, read at scrape time from the reconciler's state."""

from __future__ import annotations

import msgspec

from reconciler.api import Job, ResourceClaimTemplate
from reconciler.api.resources import JOBS, RESOURCE_CLAIM_TEMPLATES, WORKLOADS
from reconciler.runtime.actions import Create
from reconciler.runtime.snapshot import state_snapshot
from reconciler.runtime.writer import WriteDone
from tests.support.builders import job_body
from tests.support.metrics import scrape, value
from tests.support.reconciler_harness import Harness, created_workload, decode, of, queues


def submit(h: Harness, name: str, template: str, parallelism: int) -> None:
    body = job_body(
        name,
        uid=f"uid-{name}",
        claims=[{"name": "g", "resourceClaimTemplateName": template}],
        parallelism=parallelism,
        completions=parallelism,
    )
    body["metadata"]["resourceVersion"] = h.next_rv()
    h.event("ADDED", JOBS, decode(body, Job))
    (create,) = of(h.take(), "create-workload")
    assert isinstance(create, Create)
    workload = created_workload(h, create)
    h.reconciler.handle(WriteDone(create, body=msgspec.json.encode(workload)))
    h.event("ADDED", WORKLOADS, workload)
    h.take()


def test_devices_claims_and_unmapped_classes_are_reported_per_device_class() -> None:
    h = Harness()
    queues(h, gpus=2)
    body = {
        "metadata": {"name": "fpga", "namespace": "ns"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "f", "exactly": {"deviceClassName": "fpga.example.com"}}]}
            }
        },
    }
    h.event("ADDED", RESOURCE_CLAIM_TEMPLATES, decode(body, ResourceClaimTemplate))
    h.sync_all()
    submit(h, "a", "gpu", 2)  # admitted: 2 pods, one GPU claim each
    submit(h, "b", "gpu", 3)  # pending: no quota left
    submit(h, "c", "fpga", 1)  # pending: its DeviceClass has no mapping
    metrics = h.reconciler.metrics
    metrics.state_source = lambda: state_snapshot(h.reconciler)
    _, samples = scrape(metrics)
    devices = "dra_quota_device_class_requested_devices"
    assert value(samples, devices, device_class="gpu.nvidia.com", status="admitted") == 2
    assert value(samples, devices, device_class="gpu.nvidia.com", status="pending") == 3
    claims = "dra_quota_device_class_claims"
    assert value(samples, claims, device_class="gpu.nvidia.com", status="admitted") == 2
    assert value(samples, claims, device_class="gpu.nvidia.com", status="pending") == 3
    unmapped = "dra_quota_device_class_unmapped_workloads"
    assert value(samples, unmapped, device_class="fpga.example.com") == 1
    assert value(samples, unmapped, device_class="gpu.nvidia.com") is None
