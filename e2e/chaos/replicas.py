"""Two replicas of ``reconciler run --leader-elect`` (batch/job, pod and JobSet frameworks, webhooks on),
their roles as their ``/readyz`` tells them, and a TCP proxy for the admission webhooks.

The test-bed has no Service in front of the replicas: a webhook configuration names one URL, so
it names the proxy, which passes each connection through (TLS untouched) to a replica whose
``/readyz`` answered on the last probe round. A stopped (SIGSTOP) replica does not answer, so the
API server's calls go to the other one, as a Service would route them. ``blocked`` refuses every
connection: the webhook-outage fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import yaml

from e2e.support.deploy import ControllerProcess, free_port
from e2e.support.faults import ELECTION, ROLE_HEADER
from e2e.support.webhooks import loopback_certificate
from e2e.testbed.names import DEVICE_CLASS_NAME

NAMES = ("replica-a", "replica-b")


def make_replicas(folder: Path, kubeconfig: Path) -> tuple[dict[str, ControllerProcess], bytes]:
    """The two replicas (not started) sharing one configuration and one loopback certificate; the CA."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_pem = loopback_certificate(folder / "certs").ca.cert_pem
    config = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": {"frameworks": ["batch/job", "pod", "jobset.x-k8s.io/jobset"]},
        "internalCertManagement": {"enable": False},
        "resources": {
            "deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": [DEVICE_CLASS_NAME]}]
        },
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    replicas = {
        name: ControllerProcess(
            folder / "config.yaml",
            kubeconfig,
            folder / f"{name}.log",
            *ELECTION,
            "--leader-election-identity",
            name,
            "--webhook-cert-dir",
            str(folder / "certs"),
            webhook_port=free_port(),
        )
        for name in NAMES
    }
    return replicas, ca_pem


@dataclass
class Roles:
    """Probes every replica's /readyz every ``interval`` s: its role header, or None (no answer)."""

    replicas: dict[str, ControllerProcess]
    interval: float = 0.3
    latest: dict[str, tuple[int | None, str]] = field(default_factory=dict)  # name -> (status, role)
    two_leaders: int = 0  # probe rounds in which both replicas said leader
    rounds: int = 0
    _stopping: bool = False

    def leader(self) -> str | None:
        """The replica that said ``leader`` with 200 on the last round."""
        for name, (status, role) in self.latest.items():
            if status == 200 and role == "leader":
                return name
        return None

    def answering(self) -> list[str]:
        return [name for name, (status, _) in self.latest.items() if status is not None]

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Roles]:
        task = asyncio.get_running_loop().create_task(self._loop(), name="roles")
        try:
            yield self
        finally:
            self._stopping = True
            task.cancel()
            await asyncio.wait([task], timeout=10)

    async def _loop(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1.5)) as session:
            while not self._stopping:
                began = time.monotonic()
                names = list(self.replicas)
                answers = await asyncio.gather(*(self._ask(session, n) for n in names))
                self.latest = dict(zip(names, answers, strict=True))
                self.rounds += 1
                if sum(1 for _, role in answers if role == "leader") > 1:
                    self.two_leaders += 1
                await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - began)))

    async def _ask(self, session: aiohttp.ClientSession, name: str) -> tuple[int | None, str]:
        url = f"http://127.0.0.1:{self.replicas[name].health_port}/readyz"
        try:
            async with session.get(url) as resp:
                await resp.read()
                return resp.status, resp.headers.get(ROLE_HEADER, "")
        except (aiohttp.ClientError, TimeoutError, OSError):
            return None, ""


@dataclass
class WebhookProxy:
    """127.0.0.1:``port`` passed through to the webhook port of a replica that answers its probe."""

    replicas: dict[str, ControllerProcess]
    roles: Roles
    port: int = field(default_factory=free_port)
    blocked: bool = False
    connections: int = 0
    refused: int = 0
    _server: asyncio.Server | None = None

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[WebhookProxy]:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        try:
            yield self
        finally:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), timeout=5)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        if not self.blocked:
            for name in self.roles.answering() or list(self.replicas):
                port = self.replicas[name].webhook_port
                assert port is not None
                with contextlib.suppress(OSError, TimeoutError):
                    upstream = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout=1)
                    break
        if upstream is None:
            self.refused += 1
            writer.close()
            return
        up_reader, up_writer = upstream
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer), return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        writer.close()
