"""What the tests of the controller under faults (SIGKILL, API server restart, fail-over:
e2e/test_controller_faults.py, e2e/test_controller_ha.py) share: a test-bed and a controller
process of the test's own, and a wait on the monitors that fails with their context."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from e2e.support.deploy import ControllerProcess
from e2e.support.flood import CONTROLLER_CONFIG
from e2e.testbed import Testbed, TestbedSpec

# Leader election of the fail-over test and the chaos run. Short enough to test a takeover in
# seconds, long enough that a leader on a loaded CI machine (three test-beds and a flood at once)
# is not dropped by one slow lease PUT: with a 3 s renew deadline a new leader lost the lease to
# one timed-out PUT in two CI runs.
LEASE_SECONDS = 8.0
ELECTION = (
    "--leader-elect",
    "--leader-election-namespace",
    "default",
    "--lease-duration",
    "8s",
    "--renew-deadline",
    "6s",
    "--retry-period",
    "1s",
)
# The header of a replica's answers that says its role.
ROLE_HEADER = "X-Replica-Role"


@contextlib.asynccontextmanager
async def own_testbed(run_dir: Path, spec: TestbedSpec) -> AsyncIterator[Testbed]:
    bed = Testbed(run_dir=run_dir, spec=spec)
    await asyncio.to_thread(bed.start)
    try:
        yield bed
    finally:
        await asyncio.to_thread(bed.stop)


@contextlib.asynccontextmanager
async def controller_process(bed: Testbed) -> AsyncIterator[ControllerProcess]:
    controller = ControllerProcess(CONTROLLER_CONFIG, bed.kubeconfig, bed.run_dir / "logs" / "controller.log")
    await asyncio.to_thread(controller.start)
    try:
        yield controller
    finally:
        await asyncio.to_thread(controller.stop)


async def until(what: str, check: Callable[[], bool], within: float, context: Callable[[], str]) -> float:
    """Wait (polling every 0.2 s) until ``check()``; the seconds it took. Fails with ``context()``."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > within:
            raise AssertionError(f"timed out after {within:.0f}s waiting for {what}\n{context()}")
        await asyncio.sleep(0.2)
    return time.monotonic() - began
