"""`reconciler explain` on the test-bed: the walkthrough's job B explained while it waits for job A's GPU.

The controller runs the walkthrough (items 1 to 6, e2e/support/walkthrough_steps.py); while job
B waits, `reconciler explain` runs as a user would run it (a child process with the admin
kubeconfig, no --config: the DeviceClass mapping is learned from what the controller charged).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from e2e.support.deploy import ROOT, ControllerProcess
from e2e.support.walkthrough_steps import NS, PENDING_MESSAGE, cleanup_walkthrough, walkthrough_items_1_to_6
from e2e.testbed import KubeClient, Testbed

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

A = "kueue-dra-running-a"
B = "kueue-dra-pending-b"


async def explain(testbed: Testbed, kind: str, name: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "reconciler.cli", "explain", kind, f"{NS}/{name}"]
    argv += ["--kubeconfig", str(testbed.kubeconfig), *extra]
    return await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )


@pytest.mark.asyncio
async def test_job_b_is_explained_as_waiting_for_job_a_gpu(
    controller: ControllerProcess, testbed: Testbed
) -> None:
    seen: dict[str, Any] = {}

    async def while_b_waits() -> None:
        words = await explain(testbed, "job", B)
        assert words.returncode == 0, words.stderr
        seen["text"] = words.stdout
        as_json = await explain(testbed, "job", B, "-o", "json")
        assert as_json.returncode == 0, as_json.stderr
        seen["json"] = json.loads(as_json.stdout)
        running = await explain(testbed, "job", A)
        assert running.returncode == 0, running.stderr
        seen["a"] = running.stdout

    async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
        try:
            await walkthrough_items_1_to_6(kube, while_b_waits=while_b_waits)
            after = await explain(testbed, "job", B)
        except BaseException:
            print(controller.log_tail(60))
            raise
        finally:
            await cleanup_walkthrough(kube)

    text = seen["text"]
    assert text.startswith(
        f"Job {NS}/{B} is PENDING: it waits for quota in ClusterQueue p3-dra-cq, held by Job {NS}/{A}: "
        + PENDING_MESSAGE
    ), text
    assert f"nvidia.com/gpu in flavor p3-t4: 1 more needed; when Job {NS}/{A} finishes, it fits" in text
    assert "charged as nvidia.com/gpu" in text
    data = seen["json"]
    assert data["state"] == "pending"
    assert data["cluster_queue"] == "p3-dra-cq"
    gpu = [r for r in data["quota"] if r["resource"] == "nvidia.com/gpu"]
    assert [(r["flavor"], r["requested"], r["nominal"], r["in_use"], r["fits"]) for r in gpu] == [
        ("p3-t4", "1", "1", "1", False)
    ]
    assert [h["job"] for h in data["holders"]] == [f"{NS}/{A}"]
    assert f"QuotaReserved=False (Pending): {PENDING_MESSAGE}" in data["controller_says"]
    assert seen["a"].startswith(
        f"Job {NS}/{A} is ADMITTED: it is admitted in ClusterQueue p3-dra-cq (flavor p3-t4)"
    )
    # Once job A is gone, job B runs: explained as admitted.
    assert after.returncode == 0, after.stderr
    assert after.stdout.startswith(f"Job {NS}/{B} is ADMITTED"), after.stdout
