"""Kueue v0.18.1's own shipped Configuration file starts the controller unchanged.

The file is read from Kueue's Go module at the version e2e/versions.env pins
(`config/components/manager/controller_manager_config.yaml`, fetched through the Go module
proxy, never copied into this repository). It enables every framework Kueue ships; those this
controller does not implement are named once at start-up (a log line, the
``dra_quota_config_ignored_fields`` gauge) and in a Warning Event on the controller's own
Deployment, found from the pod it runs in (POD_NAME, POD_NAMESPACE). The controller then serves
what it implements: a batch/v1 Job in a LocalQueue is admitted and runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from e2e.support.deploy import ControllerProcess, install_crds
from e2e.support.queues import drop_queues, make_queues
from e2e.support.workloads import KUEUE
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.paths import VERSIONS_FILE
from e2e.testbed.scenario import status_condition, wait_for
from reconciler.config_sections.frameworks import KNOWN_FRAMEWORKS
from reconciler.integrations import REGISTRATIONS
from reconciler.integrations.batchjob import job_workload_name
from reconciler.runtime.loop.notices import REASON

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]
SHIPPED = "config/components/manager/controller_manager_config.yaml"
DEPLOYMENT = "kueue-controller-manager"


def kueue_shipped_configuration() -> Path:
    """Kueue's shipped Configuration file, from its module in the Go module cache."""
    versions = dict(
        line.split("=", 1) for line in VERSIONS_FILE.read_text().splitlines() if line and line[0] != "#"
    )
    module = f"sigs.k8s.io/kueue@{versions['KUEUE_VERSION'].strip()}"
    # As e2e/build-binaries.sh --kueue: the checksum database does not answer for this version,
    # so the module's hash is checked against the one versions.env pins.
    done = subprocess.run(
        ["go", "mod", "download", "-json", module],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        env={**os.environ, "GOFLAGS": "", "GONOSUMDB": "sigs.k8s.io/kueue"},
        cwd=tempfile.gettempdir(),
    )
    info = json.loads(done.stdout)
    assert info["Sum"] == versions["KUEUE_MODULE_SUM"].strip(), f"{module}: module hash {info['Sum']}"
    return Path(info["Dir"]) / SHIPPED


def _deployment(namespace: str) -> Obj:
    labels = {"app": DEPLOYMENT}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT, "namespace": namespace},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": "manager", "image": "busybox", "command": ["sleep", "inf"]}]
                },
            },
        },
    }


def _job(name: str, namespace: str) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                    ],
                }
            },
        },
    }


async def _controller_pod(kube: KubeClient, namespace: str) -> Obj:
    async def made() -> Obj | None:
        pods = (await kube.get(api_path("v1", "pods", namespace)))["items"]
        owned = [
            p
            for p in pods
            if any(r["kind"] == "ReplicaSet" for r in p["metadata"].get("ownerReferences", []))
        ]
        return dict(owned[0]) if owned else None

    return await wait_for("the Deployment's pod", made, within=60)


@pytest.mark.asyncio
async def test_kueues_shipped_configuration_starts_the_controller_naming_what_it_lacks(
    testbed: Testbed, kube: KubeClient, namespace: str, tmp_path: Path
) -> None:
    shipped = kueue_shipped_configuration()
    frameworks = yaml.safe_load(shipped.read_text())["integrations"]["frameworks"]
    assert set(frameworks) <= KNOWN_FRAMEWORKS
    missing = sorted(set(frameworks) - set(REGISTRATIONS))
    assert "batch/job" in frameworks
    assert missing, "the shipped file enables a framework this build lacks (rayservice)"
    await install_crds(kube)
    # The controller's own namespace (its pod's) is one whose jobs it leaves alone, as Kueue's.
    system = f"{namespace}-system"
    await kube.create(
        api_path("v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": system}}
    )
    await kube.create(api_path("apps/v1", "deployments", system), _deployment(system))
    pod = await _controller_pod(kube, system)
    cq = await make_queues(kube, namespace)
    controller = ControllerProcess(
        shipped,
        testbed.kubeconfig,
        tmp_path / "controller.log",
        # What the manifests give the controller's container through the downward API.
        env={
            "POD_NAME": pod["metadata"]["name"],
            "POD_NAMESPACE": system,
            "POD_TEMPLATE_HASH": pod["metadata"]["labels"]["pod-template-hash"],
        },
    )
    controller.start()
    try:
        controller.wait_ready()

        async def warned() -> Obj | None:
            events = (await kube.get(api_path("v1", "events", system)))["items"]
            return next(
                (
                    e
                    for e in events
                    if e["reason"] == REASON
                    and (e["involvedObject"]["kind"], e["involvedObject"]["name"])
                    == ("Deployment", DEPLOYMENT)
                ),
                None,
            )

        event = await wait_for("the Warning Event on the controller's Deployment", warned, within=30)
        assert event["type"] == "Warning"
        named_in_event = event["message"].split("not queued: ")[1].split("; implemented: ")[0]
        assert sorted(part.split(" (")[0] for part in named_in_event.split(", ")) == missing, event["message"]
        log = controller.log_tail(400)
        assert "integrations.frameworks enables Kueue frameworks this controller does not implement" in log
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            url = f"http://127.0.0.1:{controller.metrics_port}/metrics"
            async with http.get(url) as resp:
                text = await resp.text()
        named = [line for line in text.splitlines() if line.startswith("dra_quota_config_ignored_fields{")]
        frameworks_named = [line for line in named if "integrations.frameworks[" in line]
        assert len(frameworks_named) == len(missing), named

        # What it implements works: a Job in a LocalQueue is admitted and runs.
        job = await kube.create(api_path("batch/v1", "jobs", namespace), _job("first", namespace))
        wl_name = job_workload_name("first", job["metadata"]["uid"])

        async def admitted() -> Obj | None:
            wl = await kube.get_or_none(api_path(KUEUE, "workloads", namespace, wl_name))
            return wl if wl and status_condition(wl, "Admitted").get("status") == "True" else None

        wl = await wait_for("the Job's Workload admitted", admitted, within=60)
        assert wl["status"]["admission"]["clusterQueue"] == cq

        async def started() -> bool:
            current = await kube.get(api_path("batch/v1", "jobs", namespace, "first"))
            return current["spec"].get("suspend") is False

        await wait_for("the Job unsuspended", started, within=30)
    finally:
        # The controller releases what it holds before it stops (its Workloads' finalizers).
        await kube.delete(api_path("v1", "namespaces", name=namespace))

        async def released() -> bool:
            return not (await kube.get(api_path(KUEUE, "workloads", namespace)))["items"]

        await wait_for("the namespace's Workloads gone", released, within=60)
        code = controller.stop()
        await drop_queues(kube, namespace)
        await kube.delete(api_path("v1", "namespaces", name=system))
    assert code == 0, controller.log_tail(40)
