"""The walkthrough with a real kubelet and real containers (e2e/kubelet, e2e/kubelet/README.md).

The test-bed's control plane, one real node (containerd 2 + runc + the bridge CNI + the
kubelet of the same Kubernetes build) and the fake DRA driver's kubelet plugin registered
with that kubelet. Needs root and ``e2e/setup.sh --node``; ``e2e/test.sh`` (CI) runs it, and
``e2e/kubelet/run.sh`` alone (``-m real_kubelet``; a bare ``pytest`` leaves it out by ``addopts``).

1. a busybox pod runs and its log is read back through the API server;
2. the walkthrough's Jobs A and B (busybox instead of the CUDA image) with the controller as a
   process (``reconciler run``): A's claim prepared by the plugin, the CDI spec's environment
   in the container's log; A completes, B is admitted and runs;
3. the same with the controller deployed from manifests/ (kustomize overlay
   e2e/kubelet/deploy: image dra-quota-reconciler:dev imported into containerd), 2 replicas
   Ready by their probes, one holding the leader Lease.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.kubelet.bed import RealKubeletBed, run_pod
from e2e.kubelet.driver import build_driver_image, driver_objects
from e2e.kubelet.images import BUSYBOX_IMAGE
from e2e.kubelet.node import NODE_NAME, node_binaries
from e2e.kubelet.walkthrough import wait_for, walkthrough_real
from e2e.support.container import build_image
from e2e.support.deploy import ControllerProcess, apply_objects, install_crds, kustomize_build
from e2e.support.walkthrough_steps import EXAMPLES, cleanup_walkthrough
from e2e.testbed import ApiError, KubeClient, api_path
from e2e.testbed.fakedriver import gpu_uuid

pytestmark = [pytest.mark.real_kubelet, pytest.mark.timeout(900)]

OVERLAY = Path(__file__).parent / "kubelet" / "deploy"
SYSTEM_NS = "dra-quota-system"


@pytest.fixture(scope="module")
def bed() -> Iterator[RealKubeletBed]:
    if os.geteuid() != 0:
        pytest.fail("the real kubelet needs root (containerd, runc, mounts, the bridge)")
    missing = node_binaries().missing()
    if missing:
        pytest.fail(f"missing {missing}: run `e2e/build-binaries.sh --node` (e2e/kubelet/run.sh does)")
    # A short run directory: the plugin's registration socket lives under it (<= 107 bytes),
    # and pytest's own temporary paths grow with each worker of a parallel run.
    run_dir = Path(tempfile.mkdtemp(prefix="rk-", dir="/tmp"))
    real = RealKubeletBed(run_dir)
    try:
        real.start()
        print(f"start: {real.timings}")
        yield real
    finally:
        real.stop()
    # Removed once nothing is mounted under it any more (kept when stopping failed, for its logs).
    if not any(
        line.split()[1].startswith(f"{run_dir}/") for line in Path("/proc/mounts").read_text().splitlines()
    ):
        shutil.rmtree(run_dir, ignore_errors=True)


def test_a_busybox_pod_runs_and_its_log_is_read_back(bed: RealKubeletBed) -> None:
    async def run() -> str:
        async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
            return await run_pod(
                kube, "default", "busybox", BUSYBOX_IMAGE, "echo hello from $(hostname); cat /proc/1/cmdline"
            )

    log = asyncio.run(run())
    assert "hello from busybox" in log


def test_walkthrough_jobs_run_in_real_containers_with_the_cdi_environment(bed: RealKubeletBed) -> None:
    assert bed.node is not None
    controller = ControllerProcess(
        EXAMPLES / "00-configuration.yaml", bed.kubeconfig, bed.node.logs_dir / "controller.log"
    )

    async def run() -> dict[str, str]:
        async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
            await install_crds(kube)
            controller.start()
            try:
                return await walkthrough_real(kube, NODE_NAME)
            except BaseException:
                print(controller.log_tail(60))
                raise
            finally:
                controller.stop()
                await cleanup_after(kube, controller)

    logs = asyncio.run(run())
    assert f"GPU_DEVICE_0_UUID={gpu_uuid(NODE_NAME, 0)}" in logs["a"].splitlines()


async def cleanup_after(kube: KubeClient, controller: ControllerProcess | None) -> None:
    """The walkthrough's objects go; the controller (restarted if stopped) drops finalizers."""
    if controller is not None:
        controller.start()
    try:
        await cleanup_walkthrough(kube)
    finally:
        if controller is not None:
            controller.stop()


def _import_controller_image(bed: RealKubeletBed) -> None:
    """The image of this checkout (built, or found up to date, by e2e/build-image.sh) into containerd."""
    assert bed.node is not None
    image = build_image()
    archive = bed.node.dir / "controller-image.tar"
    result = subprocess.run(["docker", "save", "-o", str(archive), image], capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"docker save {image} failed ({result.stderr.strip()}): run e2e/build-image.sh")
    bed.node.import_image(archive)
    archive.unlink()


async def deploy_controller(kube: KubeClient, objects: list[dict[str, Any]]) -> set[str]:
    """Apply the overlay; wait for 2 Ready replicas on the node and a leader; their names."""
    await apply_objects(kube, objects)
    deployment = api_path("apps/v1", "deployments", SYSTEM_NS, "dra-quota-reconciler")

    async def available() -> bool:
        status = (await kube.get(deployment)).get("status", {})
        return bool(status.get("readyReplicas") == 2 and status.get("availableReplicas") == 2)

    await wait_for("2 controller replicas Ready (readiness probe)", available, 240)
    pods = (
        await kube.get(
            api_path("v1", "pods", SYSTEM_NS),
            {"labelSelector": "app.kubernetes.io/name=dra-quota-reconciler"},
        )
    )["items"]
    names = {p["metadata"]["name"] for p in pods if not p["metadata"].get("deletionTimestamp")}
    assert len(names) == 2
    assert all(p["spec"]["nodeName"] == NODE_NAME for p in pods)
    lease_path = api_path("coordination.k8s.io/v1", "leases", SYSTEM_NS, "dra-quota-reconciler")

    async def led() -> bool:
        lease = await kube.get_or_none(lease_path)
        return bool(lease and lease["spec"].get("holderIdentity") in names)

    await wait_for("one replica to hold the Lease", led, 60)
    return names


async def print_pods(kube: KubeClient, namespace: str) -> None:
    for pod in (await kube.get(api_path("v1", "pods", namespace)))["items"]:
        name = pod["metadata"]["name"]
        print(name, pod.get("status", {}).get("phase"), pod.get("status", {}).get("containerStatuses"))
        try:
            log = await kube.get(api_path("v1", "pods", namespace, name, "log"), {"tailLines": "40"})
            print(log.get("raw", log))
        except ApiError as err:
            print(f"no log: {err}")


def test_walkthrough_with_the_controller_deployed_from_manifests(bed: RealKubeletBed) -> None:
    _import_controller_image(bed)
    objects = kustomize_build(OVERLAY)

    async def run() -> None:
        async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
            try:
                await deploy_controller(kube, objects)
                await walkthrough_real(kube, NODE_NAME)
                await cleanup_walkthrough(kube)
            except BaseException:
                await print_pods(kube, SYSTEM_NS)
                raise

    asyncio.run(run())


def test_the_fake_driver_as_the_kind_daemonset(bed: RealKubeletBed) -> None:
    """The kind path's driver DaemonSet (its image built here) instead of the plugin process,
    with the controller from manifests/: the walkthrough again."""
    assert bed.node is not None
    node = bed.node
    build_driver_image(node)
    _import_controller_image(bed)
    controller_objects = kustomize_build(OVERLAY)
    before = bed.registrations()
    bed.stop_plugin()

    async def run() -> None:
        async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
            try:
                await apply_objects(kube, driver_objects(node))
                daemonset = api_path(
                    "apps/v1", "daemonsets", "fake-dra-driver", "fake-dra-driver-kubelet-plugin"
                )

                async def ready() -> bool:
                    status = (await kube.get(daemonset)).get("status", {})
                    return bool(status.get("numberReady") == 1)

                await wait_for("the driver DaemonSet's pod Ready", ready, 180)
                await bed.wait_registered(more_than=before)
                await deploy_controller(kube, controller_objects)
                await walkthrough_real(kube, NODE_NAME)
                await cleanup_walkthrough(kube)
            except BaseException:
                await print_pods(kube, "fake-dra-driver")
                await print_pods(kube, SYSTEM_NS)
                raise

    asyncio.run(run())
