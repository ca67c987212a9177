"""DRA beyond Kueue on the test-bed: live reload of deviceClassMappings (a ConfigMap-style symlink
swap), firstAvailable requests, shared claims charged once, and the DRA metrics.

The controller polls its configuration file every 0.5 s. Tests that need a second DeviceClass
create one (same CEL selector as the fake driver's ``gpu.nvidia.com``, so its devices are real).
"""

from __future__ import annotations

import asyncio
import os
import re
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.support.deploy import ControllerProcess, install_crds
from e2e.support.queues import drop_queues, make_queues
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.names import DEVICE_CLASS_NAME, DEVICE_CLASS_SELECTOR, RUN_SECONDS_ANNOTATION
from e2e.testbed.scenario import single_gpu_claim_spec, status_condition, wait_for
from reconciler.integrations.batchjob import job_workload_name

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

RESOURCE_V1 = "resource.k8s.io/v1"
FIRST_AVAILABLE = "dra-quota-reconciler/first-available"
Obj = dict[str, Any]


def config(classes: list[str]) -> Obj:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {"deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": classes}]},
    }


class MountedConfig:
    """A configuration file laid out as the kubelet mounts a ConfigMap: config.yaml ->
    ..data/config.yaml, ..data -> ..<version>; an update swaps ..data atomically."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = folder / "config.yaml"

    def write(self, text: str) -> None:
        version = self.folder / f"..{uuid.uuid4().hex[:8]}"
        version.mkdir()
        (version / "config.yaml").write_text(text)
        tmp = self.folder / "..data_tmp"
        tmp.symlink_to(version.name)
        os.replace(tmp, self.folder / "..data")
        if not self.path.is_symlink():
            self.path.symlink_to("..data/config.yaml")


@pytest.fixture(scope="module")
def mounted(tmp_path_factory: pytest.TempPathFactory) -> MountedConfig:
    folder = tmp_path_factory.mktemp("dra-config")
    mount = MountedConfig(folder)
    mount.write(yaml.safe_dump(config([DEVICE_CLASS_NAME])))
    return mount


@pytest.fixture(scope="module")
def controller(testbed: Testbed, mounted: MountedConfig) -> Iterator[ControllerProcess]:
    async def install() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(install())
    process = ControllerProcess(
        mounted.path,
        testbed.kubeconfig,
        mounted.folder / "controller.log",
        "--config-reload-interval",
        "0.5s",
    )
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"the controller did not stop cleanly (exit {code}):\n{process.log_tail(30)}"


def job(name: str, namespace: str, claims: list[Obj], *, pods: int = 1, run_seconds: float = 2) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "parallelism": pods,
            "completions": pods,
            "suspend": True,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS_ANNOTATION: str(run_seconds)}},
                "spec": {
                    "restartPolicy": "Never",
                    "resourceClaims": claims,
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "command": ["true"],
                            "resources": {"claims": [{"name": c["name"]} for c in claims]},
                        }
                    ],
                },
            },
        },
    }


async def create_job(kube: KubeClient, body: Obj) -> str:
    namespace = body["metadata"]["namespace"]
    created = await kube.create(api_path("batch/v1", "jobs", namespace), body)
    return job_workload_name(body["metadata"]["name"], created["metadata"]["uid"])


async def template(kube: KubeClient, namespace: str, name: str, requests: list[Obj]) -> None:
    await kube.create(
        api_path(RESOURCE_V1, "resourceclaimtemplates", namespace),
        {
            "apiVersion": RESOURCE_V1,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": requests}}},
        },
    )


async def device_class(kube: KubeClient, name: str, selector: str = DEVICE_CLASS_SELECTOR) -> None:
    path = api_path(RESOURCE_V1, "deviceclasses", name=name)
    if await kube.get_or_none(path) is None:
        await kube.create(
            api_path(RESOURCE_V1, "deviceclasses"),
            {
                "apiVersion": RESOURCE_V1,
                "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": selector}}]},
            },
        )


async def workload_where(
    kube: KubeClient, namespace: str, name: str, what: str, check: Any, within: float = 60
) -> Obj:
    async def probe() -> Obj | None:
        workload = await kube.get_or_none(api_path(KUEUE, "workloads", namespace, name))
        return workload if workload is not None and check(workload) else None

    found: Obj = await wait_for(f"Workload {name}: {what}", probe, within=within)
    return found


def has(kind: str, status: str, reason: str | None = None) -> Any:
    def check(workload: Obj) -> bool:
        found = status_condition(workload, kind)
        return found.get("status") == status and (reason is None or found.get("reason") == reason)

    return check


def scrape(controller: ControllerProcess) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{controller.metrics_port}/metrics", timeout=5) as response:
        text: str = response.read().decode()
    return text


def sample(text: str, name: str, **labels: str) -> float | None:
    for line in text.splitlines():
        match = re.fullmatch(r"([a-z_]+)(?:\{(.*)\})? (\S+)", line)
        if match is None or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(2) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(match.group(3))
    return None


@pytest.mark.asyncio
async def test_a_mapping_added_live_admits_the_waiting_job_and_a_bad_file_is_refused(
    controller: ControllerProcess, mounted: MountedConfig, kube: KubeClient, namespace: str
) -> None:
    alias = f"gpu-{namespace}.example.com"
    await device_class(kube, alias)
    await make_queues(kube, namespace, gpus=1)
    try:
        request = {"name": "gpu", "exactly": {"deviceClassName": alias, "count": 1}}
        await template(kube, namespace, "alias-gpu", [request])
        claims = [{"name": "gpu", "resourceClaimTemplateName": "alias-gpu"}]
        waiting = await create_job(kube, job("alias", namespace, claims))
        pending = await workload_where(
            kube, namespace, waiting, "QuotaReserved=False", has("QuotaReserved", "False")
        )
        assert f"DeviceClass {alias} is not mapped" in status_condition(pending, "QuotaReserved")["message"]
        text = scrape(controller)
        assert sample(text, "dra_quota_device_class_unmapped_workloads", device_class=alias) == 1

        # The ConfigMap is updated: both classes now count as nvidia.com/gpu, without a restart.
        mounted.write(yaml.safe_dump(config([DEVICE_CLASS_NAME, alias])))
        admitted = await workload_where(
            kube, namespace, waiting, "admitted", has("Admitted", "True"), within=30
        )
        (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
        assert assignment["resourceUsage"] == {"nvidia.com/gpu": "1"}
        await workload_where(kube, namespace, waiting, "finished", has("Finished", "True"), within=90)
        text = scrape(controller)
        assert sample(text, "dra_quota_config_reload_total", result="applied") == 1
        assert sample(text, "dra_quota_config_generation") == 2

        # A file with an error is refused, naming the field; the mappings in use are kept.
        bad = config([DEVICE_CLASS_NAME, alias])
        bad["resources"]["deviceClassMappings"].append(
            {"name": "example.com/other", "deviceClassNames": [alias]}
        )
        mounted.write(yaml.safe_dump(bad))

        async def refused() -> bool:
            return "configuration change refused" in controller.log_tail(200)

        await wait_for("the controller to refuse the bad file", refused, within=15)
        assert "resources.deviceClassMappings[1].deviceClassNames[0]" in controller.log_tail(200)
        assert sample(scrape(controller), "dra_quota_config_reload_total", result="invalid") == 1
        again = await create_job(kube, job("alias-again", namespace, claims))
        await workload_where(kube, namespace, again, "admitted", has("Admitted", "True"), within=30)
    finally:
        mounted.write(yaml.safe_dump(config([DEVICE_CLASS_NAME])))
        await drop_queues(kube, namespace)


@pytest.mark.asyncio
async def test_first_available_charges_the_mapped_subrequest_and_says_which(
    controller: ControllerProcess, kube: KubeClient, namespace: str
) -> None:
    # A DeviceClass no device matches, and not mapped: the scheduler and the quota both skip it.
    slices = f"slices-{namespace}.example.com"
    await device_class(kube, slices, selector="device.driver == 'nothing.example.com'")
    await make_queues(kube, namespace, gpus=1)
    try:
        await template(
            kube,
            namespace,
            "slice-or-gpu",
            [
                {
                    "name": "gpu",
                    "firstAvailable": [
                        {"name": "slice", "deviceClassName": slices},
                        {"name": "whole", "deviceClassName": DEVICE_CLASS_NAME},
                    ],
                }
            ],
        )
        claims = [{"name": "gpu", "resourceClaimTemplateName": "slice-or-gpu"}]
        name = await create_job(kube, job("first-available", namespace, claims))
        admitted = await workload_where(kube, namespace, name, "admitted", has("Admitted", "True"), within=30)
        (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
        assert assignment["resourceUsage"] == {"nvidia.com/gpu": "1"}

        async def annotated() -> str | None:
            workload = await kube.get(api_path(KUEUE, "workloads", namespace, name))
            value: str | None = workload["metadata"].get("annotations", {}).get(FIRST_AVAILABLE)
            return value

        choice = await wait_for("the firstAvailable annotation", annotated, within=15)
        assert choice == (
            "podset main, claim gpu, request gpu: subrequest whole "
            f"(DeviceClass {DEVICE_CLASS_NAME} charged as 1 nvidia.com/gpu)"
        )
        await workload_where(kube, namespace, name, "finished", has("Finished", "True"), within=90)
    finally:
        await drop_queues(kube, namespace)


@pytest.mark.asyncio
async def test_a_shared_claim_is_charged_once_for_all_pods(
    controller: ControllerProcess, kube: KubeClient, namespace: str
) -> None:
    await make_queues(kube, namespace, gpus=1)
    try:
        claims = [{"name": "gpu", "resourceClaimName": "team-gpu"}]
        # Three pods share one claim: one GPU of quota, not three. The claim does not exist yet.
        name = await create_job(kube, job("shared", namespace, claims, pods=3, run_seconds=5))
        pending = await workload_where(
            kube, namespace, name, "QuotaReserved=False", has("QuotaReserved", "False")
        )
        assert (
            f"ResourceClaim {namespace}/team-gpu does not exist"
            in status_condition(pending, "QuotaReserved")["message"]
        )
        await kube.create(
            api_path(RESOURCE_V1, "resourceclaims", namespace),
            {
                "apiVersion": RESOURCE_V1,
                "kind": "ResourceClaim",
                "metadata": {"name": "team-gpu", "namespace": namespace},
                "spec": single_gpu_claim_spec(),
            },
        )
        admitted = await workload_where(kube, namespace, name, "admitted", has("Admitted", "True"), within=30)
        (assignment,) = admitted["status"]["admission"]["podSetAssignments"]
        assert assignment["count"] == 3
        assert assignment["resourceUsage"] == {"nvidia.com/gpu": "1"}
        text = scrape(controller)
        assert (
            sample(
                text,
                "dra_quota_device_class_requested_devices",
                device_class=DEVICE_CLASS_NAME,
                status="admitted",
            )
            == 1
        )
        assert (
            sample(text, "dra_quota_device_class_claims", device_class=DEVICE_CLASS_NAME, status="admitted")
            == 1
        )
        # All three pods run on the one GPU the claim holds.
        await workload_where(kube, namespace, name, "finished", has("Finished", "True"), within=90)
    finally:
        await drop_queues(kube, namespace)
