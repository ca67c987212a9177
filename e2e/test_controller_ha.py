"""Two replicas of `reconciler run --leader-elect` on a test-bed of their own, under a flood of Jobs.

Short lease settings (lease 8 s, renew deadline 6 s, retry 1 s). Replica a leads, b stands by.
During the flood:

1. a is SIGKILLed: b takes over within the lease duration (plus a little slack) counted from the
   kill; a is started again and stands by;
2. b (now leading) gets SIGTERM: it drains, releases the Lease, and a takes over well before the
   lease duration, counted from b's exit.

Throughout, :class:`e2e.support.invariants.InvariantMonitor` checks that no ClusterQueue is
over-committed at any observed instant and that no Workload is admitted (nor Job unsuspended)
twice, and both replicas' ``/readyz`` are polled every 0.2 s: at most one says ``leader`` (header
``X-Replica-Role``) in any round, and each body says the same as its header. At the end every Job
is admitted and finished (or pending with a reason) and no Workload got two QuotaReserved events.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from e2e.support.deploy import ControllerProcess, install_crds
from e2e.support.faults import ELECTION, LEASE_SECONDS, ROLE_HEADER, own_testbed, until
from e2e.support.final_state import settle_final, verify_final
from e2e.support.flood import (
    CONTROLLER_CONFIG,
    GPU,
    create_jobs,
    create_queues,
    flood,
    four_queues,
    pool_nodes,
)
from e2e.support.invariants import InvariantMonitor
from e2e.testbed import KubeClient, TestbedSpec, api_path

pytestmark = [pytest.mark.testbed]

STANDING_BY = re.compile(r"standing by: not the leader \(leader is (?P<leader>[\w.-]+)\)")


@dataclass(frozen=True)
class Answer:
    at: float
    replica: str
    status: int | None  # None: no answer (connection refused while the replica is down)
    role: str = ""
    body: str = ""


@dataclass
class RolePoller:
    """Asks every replica's /readyz every ``interval`` seconds, all at once, and checks each round."""

    replicas: dict[str, ControllerProcess]
    interval: float = 0.2
    rounds: list[list[Answer]] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    _stopping: bool = False

    def latest(self, replica: str) -> Answer | None:
        for answers in reversed(self.rounds):
            for answer in answers:
                if answer.replica == replica:
                    return answer
        return None

    def leads(self, replica: str) -> bool:
        answer = self.latest(replica)
        return answer is not None and answer.role == "leader"

    def ready_leader(self, replica: str) -> bool:
        answer = self.latest(replica)
        return answer is not None and answer.role == "leader" and answer.status == 200

    def standing_by(self, replica: str, leader: str) -> bool:
        answer = self.latest(replica)
        if answer is None or answer.status != 200:
            return False
        match = STANDING_BY.fullmatch(answer.body)
        return answer.role == "follower" and match is not None and match["leader"] == leader

    def first_leader_answer(self, replica: str, after: float) -> float | None:
        for answers in self.rounds:
            for answer in answers:
                if answer.replica == replica and answer.at >= after and answer.role == "leader":
                    return answer.at
        return None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[RolePoller]:
        task = asyncio.get_running_loop().create_task(self._loop())
        try:
            yield self
        finally:
            self._stopping = True
            task.cancel()
            await asyncio.wait([task], timeout=10)

    async def _loop(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while not self._stopping:
                began = time.monotonic()
                answers = await asyncio.gather(*(self._ask(session, n, p) for n, p in self.replicas.items()))
                self.rounds.append(list(answers))
                self._check(list(answers))
                await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - began)))

    async def _ask(self, session: aiohttp.ClientSession, name: str, process: ControllerProcess) -> Answer:
        url = f"http://127.0.0.1:{process.health_port}/readyz"
        try:
            async with session.get(url) as resp:
                body = (await resp.text()).strip()
                return Answer(time.monotonic(), name, resp.status, resp.headers.get(ROLE_HEADER, ""), body)
        except (aiohttp.ClientError, TimeoutError):
            return Answer(time.monotonic(), name, None)

    def _check(self, answers: list[Answer]) -> None:
        leaders = [a.replica for a in answers if a.role == "leader"]
        if len(leaders) > 1:
            self.violations.append(f"{len(self.rounds)}: more than one replica says leader: {leaders}")
        for a in answers:
            if a.status is None:
                continue
            truthful = False
            if a.role == "leader":
                truthful = (a.status == 200 and a.body.startswith("ok: leader")) or (
                    a.status == 503 and a.body.startswith("not ready: leader")
                )
            elif a.role == "follower":
                match = STANDING_BY.fullmatch(a.body)
                truthful = (
                    a.status == 200 and match is not None and match["leader"] in {*self.replicas, "unknown"}
                ) or (a.status == 503 and a.body == "not ready: follower, shutting down")
                if match is not None and match["leader"] == a.replica:
                    truthful = False
            if not truthful:
                self.violations.append(
                    f"{len(self.rounds)}: {a.replica} said {a.status} {a.role!r}: {a.body!r}"
                )


async def quota_reserved_events(kube: KubeClient, namespaces: list[str]) -> Counter[str]:
    counts: Counter[str] = Counter()
    for ns in namespaces:
        for event in (await kube.get(api_path("v1", "events", ns)))["items"]:
            if event.get("reason") == "QuotaReserved":
                counts[f"{ns}/{event['involvedObject']['name']}"] += int(event.get("count") or 1)
    return counts


def series(metric: str, /, **labels: str) -> str:
    """A sample's key in :func:`scrape`'s result: the name and its labels sorted by name."""
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"{metric}{{{inner}}}" if inner else metric


async def scrape(process: ControllerProcess) -> dict[str, float]:
    """Sample (name with its labels sorted by name) -> value, from the process's /metrics."""
    url = f"http://127.0.0.1:{process.metrics_port}/metrics"
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200
        text = await resp.text()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[series(s.name, **s.labels)] = s.value
    return samples


@pytest.mark.timeout(400)
@pytest.mark.asyncio
async def test_failover_under_a_flood_keeps_quota_and_roles_truthful(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    queues = four_queues()[:2]
    spec = TestbedSpec(nodes=[n for q in queues for n in pool_nodes(q.pool, 1, int(q.quota[GPU]) + 1)])
    jobs = flood(queues, per_queue=30)
    quotas = {k: v for q in queues for k, v in q.quota_limits().items()}
    monitor = InvariantMonitor(quotas)
    began = time.monotonic()
    async with (
        own_testbed(tmp_path_factory.mktemp("testbed-ha"), spec) as bed,
        KubeClient.from_kubeconfig(bed.kubeconfig) as kube,
    ):
        await install_crds(kube)
        await create_queues(kube, queues)
        logs = bed.run_dir / "logs"
        replicas = {
            name: ControllerProcess(
                CONTROLLER_CONFIG,
                bed.kubeconfig,
                logs / f"{name}.log",
                *ELECTION,
                "--leader-election-identity",
                name,
            )
            for name in ("replica-a", "replica-b")
        }
        a, b = replicas["replica-a"], replicas["replica-b"]
        poller = RolePoller(replicas)

        def context() -> str:
            tails = "\n".join(f"--- {n} log tail:\n{p.log_tail(25)}" for n, p in replicas.items())
            latest = {n: poller.latest(n) for n in replicas}
            return f"monitor: {monitor.summary()}\nlatest /readyz: {latest}\n{tails}"

        try:
            async with poller.running():
                await asyncio.to_thread(a.start)
                await until(
                    "replica-a to lead and be ready", lambda: poller.ready_leader("replica-a"), 60, context
                )
                await asyncio.to_thread(b.start)
                await until(
                    "replica-b to stand by", lambda: poller.standing_by("replica-b", "replica-a"), 30, context
                )
                async with monitor.running(kube):
                    await create_jobs(kube, jobs, concurrency=16)
                    await until("15 admissions", lambda: monitor.admitted_count() >= 15, 120, context)

                    # 1. SIGKILL the leader: the follower takes over once the lease has expired.
                    await asyncio.to_thread(a.kill)
                    killed_at = time.monotonic()
                    admitted_at_kill = monitor.admitted_count()
                    await until("replica-b to take over", lambda: poller.leads("replica-b"), 20, context)
                    led_at = poller.first_leader_answer("replica-b", killed_at)
                    assert led_at is not None, context()
                    took_over = led_at - killed_at
                    print(
                        f"\nreplica-b took over {took_over:.2f}s after replica-a's SIGKILL"
                        f" (lease {LEASE_SECONDS}s)"
                    )
                    assert took_over <= LEASE_SECONDS + 2.5, f"took over {took_over:.1f}s after the kill"
                    await until(
                        "replica-b to be ready", lambda: poller.ready_leader("replica-b"), 30, context
                    )
                    await asyncio.to_thread(a.start)
                    await until(
                        "replica-a to stand by again",
                        lambda: poller.standing_by("replica-a", "replica-b"),
                        30,
                        context,
                    )
                    await until(
                        "admissions under replica-b",
                        lambda: monitor.admitted_count() >= admitted_at_kill + 10,
                        120,
                        context,
                    )

                    # 2. SIGTERM the leader: it releases the Lease, no waiting for expiry.
                    terminated_at = time.monotonic()
                    code = await asyncio.to_thread(b.stop)
                    exited_at = time.monotonic()
                    assert code == 0, f"replica-b did not stop cleanly (exit {code})\n{context()}"
                    assert "released the lease" in b.log_path.read_text(), context()
                    await until("replica-a to take over", lambda: poller.leads("replica-a"), 20, context)
                    led_at = poller.first_leader_answer("replica-a", terminated_at)
                    assert led_at is not None, context()
                    # The release comes last, just before b exits: a may even lead before that.
                    handed_over = led_at - exited_at
                    assert handed_over < LEASE_SECONDS / 2, f"took over {handed_over:.1f}s after b exited"

                    try:
                        await until(
                            "every Job to complete",
                            lambda: monitor.complete_jobs() >= len(jobs),
                            150,
                            context,
                        )
                    except AssertionError as err:
                        state = await verify_final(kube, [q.namespace for q in queues])
                        raise AssertionError(f"{err}\nnot finished: {state.problems[:10]}") from None
                    finished, pending = await settle_final(kube, [q.namespace for q in queues], 30, context)
                    await asyncio.sleep(1.0)  # a few more samples of the final state
                    scraped = await scrape(a)
                events = await quota_reserved_events(kube, [q.namespace for q in queues])
        finally:
            for process in replicas.values():
                await asyncio.to_thread(process.stop)
        monitor.assert_clean()
        assert not poller.violations, "replicas did not tell the truth:\n" + "\n".join(poller.violations[:20])
        twice = {name: n for name, n in events.items() if n > 1}
        assert not twice, f"Workloads with more than one QuotaReserved event: {twice}"
        assert (finished, pending) == (len(jobs), 0)
        # The new leader's /metrics: its role, the queues' quota and the end state of the flood.
        assert scraped["dra_quota_leader"] == 1.0
        for q in queues:
            cq = {"cluster_queue": q.cluster_queue, "replica_role": "leader"}
            quota = {**cq, "cohort": "", "flavor": q.flavor, "resource": GPU}
            assert scraped[series("kueue_cluster_queue_nominal_quota", **quota)] == float(q.quota[GPU])
            assert scraped[series("kueue_cluster_queue_resource_usage", **quota)] == 0.0
            assert scraped[series("kueue_pending_workloads", status="active", **cq)] == 0.0
            assert scraped[series("kueue_cluster_queue_status", status="active", **cq)] == 1.0
            assert scraped[series("kueue_finished_workloads", **cq)] == 30.0
        print(
            f"\nSIGKILL after {admitted_at_kill} admissions: replica-b led {took_over:.1f}s later; "
            f"SIGTERM: replica-a led {handed_over:+.1f}s from replica-b's exit; {len(poller.rounds)} probe "
            f"rounds; {time.monotonic() - began:.0f}s; {monitor.summary()}"
        )
