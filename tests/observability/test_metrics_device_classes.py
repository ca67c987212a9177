"""DRA metrics per DeviceClass, read at scrape time from the reconciler's state."""

from __future__ import annotations

from reconciler.api import ClusterQueue, Job, LocalQueue, Namespace, ResourceClaimTemplate, ResourceFlavor
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    NAMESPACES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_FLAVORS,
)
from reconciler.config import parse_config
from reconciler.runtime.loop.snapshot import state_snapshot
from tests.support.builders import cluster_queue_body, job_body
from tests.support.metrics import scrape, value
from tests.support.reconciler_harness import Harness, decode, queues, submitted


def submit(h: Harness, name: str, template: str, parallelism: int) -> None:
    body = job_body(
        name,
        uid=f"uid-{name}",
        claims=[{"name": "g", "resourceClaimTemplateName": template}],
        parallelism=parallelism,
        completions=parallelism,
    )
    body["metadata"]["resourceVersion"] = h.next_rv()
    submitted(h, decode(body, Job))
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


def test_capacity_charges_are_reported_per_device_class_and_resource() -> None:
    """A class charged by two capacities (GPU memory and cores, HAMi-style): what admitted
    Workloads hold of each shows under the class."""
    memory, cores = "example.com/gpu-memory", "example.com/gpu-cores"
    config = parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "resources": {
                "deviceClassMappings": [
                    {
                        "name": "example.com/vgpu",
                        "deviceClassNames": ["hami.example.com"],
                        "capacity": [
                            {"name": "memory", "resource": memory},
                            {"name": "cores", "resource": cores},
                        ],
                    }
                ]
            },
        }
    )
    h = Harness(config)
    quotas: dict[str, str | int] = {"example.com/vgpu": 4, memory: "16Gi", cores: 100}
    h.event("ADDED", NAMESPACES, decode({"metadata": {"name": "ns"}}, Namespace))
    h.event("ADDED", RESOURCE_FLAVORS, decode({"metadata": {"name": "t4"}, "spec": {}}, ResourceFlavor))
    h.event("ADDED", CLUSTER_QUEUES, decode(cluster_queue_body("cq", [("t4", quotas)]), ClusterQueue))
    lq = {"metadata": {"name": "lq", "namespace": "ns"}, "spec": {"clusterQueue": "cq"}}
    h.event("ADDED", LOCAL_QUEUES, decode(lq, LocalQueue))
    share = {
        "deviceClassName": "hami.example.com",
        "capacity": {"requests": {"memory": "4Gi", "cores": "30"}},
    }
    template = {
        "metadata": {"name": "share", "namespace": "ns"},
        "spec": {"spec": {"devices": {"requests": [{"name": "g", "exactly": share}]}}},
    }
    h.event("ADDED", RESOURCE_CLAIM_TEMPLATES, decode(template, ResourceClaimTemplate))
    h.sync_all()
    submit(h, "a", "share", 2)  # admitted: 2 pods of 4Gi and 30 cores each
    metrics = h.reconciler.metrics
    metrics.state_source = lambda: state_snapshot(h.reconciler)
    _, samples = scrape(metrics)
    name = "dra_quota_device_class_admitted_capacity"
    assert value(samples, name, device_class="hami.example.com", resource=memory) == 8 * 2**30
    assert value(samples, name, device_class="hami.example.com", resource=cores) == 60
    assert (
        value(
            samples,
            "dra_quota_device_class_requested_devices",
            device_class="hami.example.com",
            status="admitted",
        )
        == 2
    )
