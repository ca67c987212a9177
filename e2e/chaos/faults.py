"""The faults of a chaos run and their seeded schedule.

Kinds (:data:`FAULT_KINDS`):

- ``leader-sigkill``: the leading replica is SIGKILLed (a crash), started again 1 s later;
- ``leader-sigterm``: the leading replica is stopped (SIGTERM: it drains and releases the Lease),
  started again;
- ``leader-pause``: the leading replica is SIGSTOPped for longer than the lease (the other one
  takes over), then SIGCONTed: a leader that wakes up after losing its Lease; started again if
  it exited;
- ``apiserver-restart``: kube-apiserver stopped and started (same port, data, certificates);
- ``etcd-restart``: etcd stopped and started under the API server (same data directory);
- ``webhook-outage``: the webhook proxy refuses every connection for 6 s (pod creations fail and
  are retried; so do the Job controller's pod creations);
- ``jobset-restart``: the JobSet controller SIGKILLed and started again 1 s later (same
  certificate and ports: its webhooks stay registered).

After each fault the injector waits until both replicas run and one of them leads and is ready.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from dataclasses import dataclass, field

from e2e.chaos.replicas import Roles, WebhookProxy
from e2e.support.deploy import ControllerProcess
from e2e.support.faults import LEASE_SECONDS
from e2e.support.upstream import UpstreamProcess
from e2e.testbed import Testbed

FAULT_KINDS = (
    "leader-sigkill",
    "leader-sigterm",
    "leader-pause",
    "apiserver-restart",
    "etcd-restart",
    "webhook-outage",
    "jobset-restart",
)
RECOVERY_WITHIN = 120.0


def schedule(rng: random.Random, count: int, gap: tuple[float, float]) -> list[tuple[float, str]]:
    """``count`` faults, every kind as evenly as the count allows, in a seeded order, each after a
    seeded pause (seconds after the previous fault's recovery)."""
    kinds = [FAULT_KINDS[i % len(FAULT_KINDS)] for i in range(count)]
    rng.shuffle(kinds)
    return [(round(rng.uniform(*gap), 1), kind) for kind in kinds]


@dataclass(frozen=True)
class FaultRecord:
    kind: str
    at: float  # seconds into the run
    target: str
    recovered_in: float  # seconds from the fault until a replica led and was ready again


@dataclass
class Injector:
    bed: Testbed
    replicas: dict[str, ControllerProcess]
    roles: Roles
    proxy: WebhookProxy
    jobset: UpstreamProcess
    began: float = field(default_factory=time.monotonic)
    records: list[FaultRecord] = field(default_factory=list)
    restarts_after_pause: int = 0

    async def run(self, plan: list[tuple[float, str]]) -> None:
        for pause, kind in plan:
            await asyncio.sleep(pause)
            await self.inject(kind)

    async def inject(self, kind: str) -> FaultRecord:
        await self.recover()
        at = time.monotonic()
        target = await getattr(self, "_" + kind.replace("-", "_"))()
        recovered = await self.recover()
        record = FaultRecord(kind, round(at - self.began, 1), target, round(recovered - at, 1))
        self.records.append(record)
        print(
            f"  {record.at:6.1f}s {kind:<18} {target:<15} recovered in {record.recovered_in:.1f}s", flush=True
        )
        return record

    async def recover(self) -> float:
        """Start any replica that is not running; wait until one leads and is ready. The time then."""
        deadline = time.monotonic() + RECOVERY_WITHIN
        fresh = self.roles.rounds + 2  # a probe round begun after this call
        while True:
            for process in self.replicas.values():
                if not process.alive():
                    await asyncio.to_thread(process.start)
            if self.roles.rounds >= fresh and self.roles.leader() is not None:
                return time.monotonic()
            if time.monotonic() > deadline:
                tails = "\n".join(f"--- {n}:\n{p.log_tail(20)}" for n, p in self.replicas.items())
                raise TimeoutError(
                    f"no replica led within {RECOVERY_WITHIN:.0f}s: {self.roles.latest}\n{tails}"
                )
            await asyncio.sleep(0.3)

    def _leader(self) -> tuple[str, ControllerProcess]:
        name = self.roles.leader()
        assert name is not None, "recover() returned without a leader"
        return name, self.replicas[name]

    async def _leader_sigkill(self) -> str:
        name, process = self._leader()
        await asyncio.to_thread(process.kill)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(process.start)
        return name

    async def _leader_sigterm(self) -> str:
        name, process = self._leader()
        await asyncio.to_thread(process.stop, 20.0)
        await asyncio.to_thread(process.start)
        return name

    async def _leader_pause(self) -> str:
        name, process = self._leader()
        assert process.process is not None
        os.killpg(process.process.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(LEASE_SECONDS + 4.0)
        finally:
            os.killpg(process.process.pid, signal.SIGCONT)
        await asyncio.sleep(3.0)  # what it does once awake: carry on as a follower, or exit
        if not process.alive():
            self.restarts_after_pause += 1
        return name

    async def _apiserver_restart(self) -> str:
        await asyncio.to_thread(self.bed.restart, "kube-apiserver")
        return "kube-apiserver"

    async def _etcd_restart(self) -> str:
        await asyncio.to_thread(self.bed.restart, "etcd")
        return "etcd"

    async def _jobset_restart(self) -> str:
        await asyncio.to_thread(self.jobset.kill)
        await asyncio.sleep(1.0)
        await asyncio.to_thread(self.jobset.start)
        await self.jobset.wait_ready_async()
        return "jobset manager"

    async def _webhook_outage(self) -> str:
        self.proxy.blocked = True
        try:
            await asyncio.sleep(6.0)
        finally:
            self.proxy.blocked = False
        return "webhook proxy"
