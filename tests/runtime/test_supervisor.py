"""The process with leader election, against the fake API server: hand-over, loss, follower stop."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import random
import re
import socket
import ssl
import time
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import aiohttp
import pytest
import structlog.testing

from reconciler.config import Configuration, parse_config
from reconciler.kube.leader import ElectionConfig
from reconciler.observability.health import Health
from reconciler.observability.metrics import Metrics
from reconciler.observability.server import ROLE_HEADER, Server
from reconciler.runtime.loop.controller import ControllerOptions
from reconciler.runtime.loop.reconciler import WATCHED
from reconciler.runtime.loop.supervisor import EXIT_LEADERSHIP_LOST, ProcessOptions, run_process
from reconciler.webhook.certmanager import write_cert_dir
from reconciler.webhook.certs import new_bundle
from reconciler.webhook.service import WebhookOptions
from tests.support.fake_apiserver import FakeApiServer, page, status_reply, stream
from tests.support.leases import COLLECTION, ITEM, NAME, NS, LeaseStore

CONFIG = parse_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"})
# Certificates from outside (cert-manager's way): no Secret, nothing injected.
CERTS_OUTSIDE = parse_config(
    {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "internalCertManagement": {"enable": False},
    }
)


def free_port() -> int:
    """A free port below the ephemeral range, so no outgoing connection takes it meanwhile."""
    while True:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", random.randrange(20000, 32768)))
            except OSError:
                continue
            port: int = sock.getsockname()[1]
            return port


class ExitedError(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def raise_exit(code: int) -> NoReturn:
    raise ExitedError(code)


def serve_empty_cluster(fake: FakeApiServer, store: LeaseStore) -> None:
    for resource in WATCHED:
        fake.fallback(("LIST", resource.list_path()), page([], 1))
        fake.fallback(("WATCH", resource.list_path()), stream(end="hang"))
    fake.fallback(("LIST", ITEM), store.get)
    fake.fallback(("POST", COLLECTION), store.create)
    fake.fallback(("PUT", ITEM), store.update)


def kubeconfig(tmp_path: Path, url: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(
        f"""apiVersion: v1
kind: Config
clusters: [{{name: fake, cluster: {{server: "{url}"}}}}]
users: [{{name: u, user: {{token: t0ken}}}}]
contexts: [{{name: c, context: {{cluster: fake, user: u}}}}]
current-context: c
"""
    )
    return str(path)


class Replica:
    def __init__(self, identity: str, config_path: str, *, lease: float = 2.0, renew: float = 1.0) -> None:
        self.identity = identity
        self.stop = asyncio.Event()
        self.ports: dict[str, int] = {}
        self.options = ProcessOptions(
            controller=ControllerOptions(kubeconfig=config_path, shutdown_grace=1.0),
            metrics_bind_address="127.0.0.1:0",
            health_bind_address="127.0.0.1:0",
            leader_election=ElectionConfig(
                NS, NAME, identity, lease_duration=lease, renew_deadline=renew, retry_period=0.1
            ),
        )
        self.task: asyncio.Task[None] | None = None

    def start(self, exit_now: Callable[[int], NoReturn] = raise_exit) -> None:
        self.start_with(CONFIG, exit_now)

    def start_with(self, config: Configuration, exit_now: Callable[[int], NoReturn] = raise_exit) -> None:
        def ready(metrics: Metrics, health: Health, servers: list[Server]) -> None:
            self.ports = {"metrics": servers[0].port, "health": servers[1].port}

        self.task = asyncio.get_running_loop().create_task(
            run_process(config, self.options, self.stop, exit_now=exit_now, ready=ready)
        )

    async def get(self, server: str, path: str) -> tuple[int, str, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.ports[server]}{path}") as resp,
        ):
            return resp.status, (await resp.text()).strip(), resp.headers.get(ROLE_HEADER, "")

    async def readyz(self) -> tuple[int, str, str]:
        return await self.get("health", "/readyz")


async def eventually(what: str, check: Callable[[], object], within: float = 5.0) -> float:
    began = time.monotonic()
    while True:
        result = check()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return time.monotonic() - began
        if time.monotonic() - began > within:
            raise AssertionError(f"not within {within}s: {what}")
        await asyncio.sleep(0.05)


@pytest.mark.timeout(30)
@pytest.mark.asyncio
async def test_two_replicas_hand_over_on_sigterm_without_waiting_for_expiry(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    store = LeaseStore()
    serve_empty_cluster(fake, store)
    path = kubeconfig(tmp_path, fake.url)
    a, b = Replica("pod-a", path, lease=6.0, renew=2.0), Replica("pod-b", path, lease=6.0, renew=2.0)
    a.start()
    await eventually("a has its ports", lambda: a.ports)

    async def leads(replica: Replica) -> bool:
        return await replica.readyz() == (200, "ok: leader, all watches synced, ledger rebuilt", "leader")

    await eventually("a leads and is ready", lambda: leads(a))
    b.start()
    await eventually("b has its ports", lambda: b.ports)
    await eventually(
        "b stands by",
        lambda: _equals(b.readyz(), (200, "standing by: not the leader (leader is pod-a)", "follower")),
    )
    _status, text, _role = await b.get("metrics", "/metrics")
    assert "dra_quota_leader 0.0" in text
    assert 'replica_role="follower"' in text
    assert "kueue_pending_workloads{" not in text  # a follower has no queue state
    assert store.spec["holderIdentity"] == "pod-a"

    a.stop.set()
    stopped = time.monotonic()
    assert a.task is not None
    await asyncio.wait_for(a.task, 5)
    await eventually("b leads", lambda: leads(b))
    assert time.monotonic() - stopped < 3.0  # released: well before the 6 s lease would expire
    assert store.spec["holderIdentity"] == "pod-b"
    assert store.spec["leaseTransitions"] == 1
    _status, text, _role = await b.get("metrics", "/metrics")
    assert "dra_quota_leader 1.0" in text
    assert re.search(r'kueue_build_info\{build_date="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ",compiler=', text)
    assert 'replica_role="leader"' in text

    b.stop.set()
    assert b.task is not None
    await asyncio.wait_for(b.task, 5)
    assert "holderIdentity" not in store.spec  # released on the way out too


async def _equals(aw: object, expected: object) -> bool:
    return bool(await aw == expected)  # type: ignore[misc]


@pytest.mark.timeout(30)
@pytest.mark.asyncio
async def test_leadership_lost_exits_at_once_with_an_error(fake: FakeApiServer, tmp_path: Path) -> None:
    store = LeaseStore()
    serve_empty_cluster(fake, store)
    a = Replica("pod-a", kubeconfig(tmp_path, fake.url))
    a.start()
    await eventually(
        "a leads", lambda: store.lease is not None and store.spec.get("holderIdentity") == "pod-a"
    )
    fake.fallback(("PUT", ITEM), status_reply(500, "InternalError", "etcd is away"))
    broken = time.monotonic()
    assert a.task is not None
    with pytest.raises(ExitedError) as exited:
        await asyncio.wait_for(a.task, 5)
    assert exited.value.code == EXIT_LEADERSHIP_LOST
    # By the renew deadline (1 s), before the 2 s lease could expire for anyone else.
    assert time.monotonic() - broken < 2.0


@pytest.mark.timeout(30)
@pytest.mark.asyncio
async def test_a_stopped_follower_never_writes(fake: FakeApiServer, tmp_path: Path) -> None:
    store = LeaseStore()
    store.put({"holderIdentity": "pod-other", "leaseDurationSeconds": 60, "renewTime": "t"})
    serve_empty_cluster(fake, store)
    b = Replica("pod-b", kubeconfig(tmp_path, fake.url))
    b.start()
    await eventually("b has its ports", lambda: b.ports)
    standing_by = (200, "standing by: not the leader (leader is pod-other)", "follower")

    async def has_read_the_lease() -> bool:
        return await b.readyz() == standing_by

    # Until its first Lease read, a follower does not know the leader yet ("leader is unknown").
    await eventually("b names the leader", has_read_the_lease)
    assert await b.readyz() == standing_by
    status, _body, role = await b.get("health", "/healthz")
    assert (status, role) == (200, "follower")
    await asyncio.sleep(0.3)
    b.stop.set()
    assert b.task is not None
    await asyncio.wait_for(b.task, 5)
    assert fake.recorded("PUT") == []
    assert not [r for r in fake.recorded("GET") if r.path != ITEM]  # no watch, no list: it never led


def _webhook_replica(identity: str, path: str, cert_dir: Path, port: int = 0) -> Replica:
    replica = Replica(identity, path)
    replica.options = dataclasses.replace(
        replica.options,
        webhook=WebhookOptions(
            host="127.0.0.1", port=port, cert_dir=cert_dir, namespace=NS, reload_interval=0.1
        ),
    )
    return replica


@pytest.mark.timeout(30)
@pytest.mark.asyncio
async def test_a_follower_answers_admission_reviews(fake: FakeApiServer, tmp_path: Path) -> None:
    store = LeaseStore()
    store.put({"holderIdentity": "pod-other", "leaseDurationSeconds": 60, "renewTime": "t"})
    serve_empty_cluster(fake, store)
    bundle = new_bundle(["127.0.0.1"], datetime.datetime.now(datetime.UTC))
    write_cert_dir(tmp_path / "certs", bundle)
    port = free_port()
    b = _webhook_replica("pod-b", kubeconfig(tmp_path, fake.url), tmp_path / "certs", port)
    b.start_with(CERTS_OUTSIDE)
    await eventually("b has its ports", lambda: b.ports)
    await eventually(
        "b is ready (its webhook serves)",
        lambda: _equals(b.readyz(), (200, "standing by: not the leader (leader is pod-other)", "follower")),
    )
    job = {
        "metadata": {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}},
    }
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
            "operation": "CREATE",
            "namespace": "ns",
            "object": job,
        },
    }
    context = ssl.create_default_context(cadata=bundle.ca.cert_pem.decode())
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context)) as session,
        session.post(f"https://127.0.0.1:{port}/mutate-batch-v1-job", json=review) as resp,
    ):
        answer = await resp.json()
    assert answer["response"]["allowed"] is True
    assert answer["response"]["patchType"] == "JSONPatch"
    b.stop.set()
    assert b.task is not None
    await asyncio.wait_for(b.task, 5)
    assert fake.recorded("PUT") == []  # a follower still never writes


@pytest.mark.timeout(30)
@pytest.mark.asyncio
async def test_a_webhook_port_in_use_ends_the_process(fake: FakeApiServer, tmp_path: Path) -> None:
    store = LeaseStore()
    store.put({"holderIdentity": "pod-other", "leaseDurationSeconds": 60, "renewTime": "t"})
    serve_empty_cluster(fake, store)
    write_cert_dir(tmp_path / "certs", new_bundle(["127.0.0.1"], datetime.datetime.now(datetime.UTC)))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        b = _webhook_replica(
            "pod-b", kubeconfig(tmp_path, fake.url), tmp_path / "certs", taken.getsockname()[1]
        )
        b.start_with(CERTS_OUTSIDE)
        assert b.task is not None
        with pytest.raises(OSError, match=r"for the admission webhooks .* --webhook-bind-address"):
            await asyncio.wait_for(b.task, 10)


@pytest.mark.timeout(30)
@pytest.mark.asyncio
async def test_configuration_fields_without_effect_are_named_at_start(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    store = LeaseStore()
    store.put({"holderIdentity": "pod-other", "leaseDurationSeconds": 60, "renewTime": "t"})
    serve_empty_cluster(fake, store)
    config = parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "objectRetentionPolicies": {"workloads": {"afterFinished": "1h"}},
            "integrations": {"frameworks": ["batch/job"], "externalFrameworks": ["Foo.v1.example.com"]},
        }
    )
    b = Replica("pod-b", kubeconfig(tmp_path, fake.url))
    with structlog.testing.capture_logs() as logs:
        b.start_with(config)
        await eventually("b has its ports", lambda: b.ports)
        _status, text, _role = await b.get("metrics", "/metrics")
        b.stop.set()
        assert b.task is not None
        await asyncio.wait_for(b.task, 5)
    assert 'dra_quota_config_ignored_fields{field="objectRetentionPolicies"} 1.0' in text
    assert 'dra_quota_config_ignored_fields{field="integrations.externalFrameworks"} 1.0' in text
    (line,) = [e for e in logs if e["event"] == "configuration fields without effect in this controller"]
    assert line["log_level"] == "warning"
    assert set(line["ignored"]) == {"objectRetentionPolicies", "integrations.externalFrameworks"}
    assert "not created or managed" in line["ignored"]["integrations.externalFrameworks"]


@pytest.mark.timeout(30)
@pytest.mark.asyncio
async def test_a_leader_paused_past_its_renew_deadline_may_not_write_on_waking(
    fake: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chaos run's finding (e2e/chaos, fault leader-pause): a leader SIGSTOPped past its lease
    woke up, acted for about 2 s on its stale caches before its renewal loop saw the Lease taken,
    and finished a Workload the new leader had just admitted (OwnerNotFound: its Job not yet in the
    woken cache), so the Job never ran. The controller's writer now asks the elector before each
    write; a process that has not run for longer than the renew deadline is told no."""
    store = LeaseStore()
    serve_empty_cluster(fake, store)
    seen: list[ControllerOptions] = []

    async def controller(
        config: Configuration, options: ControllerOptions, stop: asyncio.Event, **_: object
    ) -> None:
        seen.append(options)
        await stop.wait()

    monkeypatch.setattr("reconciler.runtime.loop.supervisor.run_controller", controller)
    a = Replica("pod-a", kubeconfig(tmp_path, fake.url), lease=2.0, renew=1.0)
    a.start()
    await eventually("a leads and runs its controller", lambda: seen)
    may_write = seen[0].may_write
    assert may_write is not None
    assert may_write()  # leading, renewed within the deadline
    time.sleep(1.2)  # noqa: ASYNC251 - the whole process paused past the 1 s renew deadline
    assert not may_write()  # on waking, before the renewal loop has had a turn
    a.stop.set()
    assert a.task is not None
    await asyncio.gather(a.task, return_exceptions=True)
