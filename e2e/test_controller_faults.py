"""The controller under faults, on a test-bed of its own with one GPU node pool per ClusterQueue.

- SIGKILL in the middle of a 300-job flood over four ClusterQueues, then a restart.
- kube-apiserver restarted under load; the controller is left alone and recovers by itself.

Throughout, :class:`e2e.support.invariants.InvariantMonitor` polls Jobs and Workloads every 0.2 s
and watches Workloads: no ClusterQueue/flavor/resource ever shows more admitted usage than its
nominal quota, no Workload is admitted twice, no Job runs unsuspended without an admitted Workload.
At the end every Job is admitted-and-finished (one pod, Succeeded; Workload Finished) or pending
with a reason.

Each test starts its own test-bed (a few seconds) so the session test-bed keeps its default spec
and no flood is left behind for other tests.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from e2e.support.deploy import install_crds
from e2e.support.faults import controller_process, own_testbed, until
from e2e.support.final_state import settle_final
from e2e.support.flood import GPU, create_jobs, create_queues, flood, four_queues, pool_nodes
from e2e.support.invariants import InvariantMonitor
from e2e.testbed import KubeClient, TestbedSpec

pytestmark = [pytest.mark.testbed]


@pytest.mark.timeout(600)  # above the inner deadlines, so they fail first with context
@pytest.mark.asyncio
async def test_sigkill_mid_flood_never_overcommits_nor_admits_twice(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    queues = four_queues()
    # One node per pool with a GPU more than the quota: an over-admitted pod could run.
    spec = TestbedSpec(nodes=[n for q in queues for n in pool_nodes(q.pool, 1, int(q.quota[GPU]) + 1)])
    jobs = flood(queues, per_queue=75, too_big_at=(10, 40))
    too_big = 2 * len(queues)
    assert len(jobs) == 300
    quotas = {k: v for q in queues for k, v in q.quota_limits().items()}
    monitor = InvariantMonitor(quotas)
    began = time.monotonic()
    async with (
        own_testbed(tmp_path_factory.mktemp("testbed-k"), spec) as bed,
        KubeClient.from_kubeconfig(bed.kubeconfig) as kube,
    ):
        await install_crds(kube)
        await create_queues(kube, queues)
        async with controller_process(bed) as controller, monitor.running(kube):

            def context() -> str:
                return f"monitor: {monitor.summary()}\ncontroller log tail:\n{controller.log_tail(40)}"

            await create_jobs(kube, jobs, concurrency=16)
            await until("60 admissions", lambda: monitor.admitted_count() >= 60, 120, context)
            admitted_at_kill = monitor.admitted_count()
            await asyncio.to_thread(controller.kill)
            killed_at = time.monotonic()
            assert admitted_at_kill < len(jobs) - too_big, "the flood was over before the kill"
            await asyncio.sleep(1.0)  # the API as the dead controller left it
            await asyncio.to_thread(controller.start)
            await until(
                "every admissible Job to complete",
                lambda: monitor.complete_jobs() >= len(jobs) - too_big,
                240,
                context,
            )
            finished, pending = await settle_final(kube, [q.namespace for q in queues], 30, context)
            await asyncio.sleep(1.0)  # a few more samples of the final state
        monitor.assert_clean()
        print(
            f"\nSIGKILL after {admitted_at_kill} admissions, {killed_at - began:.0f}s in; "
            f"{finished} finished, {pending} pending; {time.monotonic() - began:.0f}s; {monitor.summary()}"
        )
        assert (finished, pending) == (len(jobs) - too_big, too_big)
        assert all(monitor.peaks[k] <= v for k, v in quotas.items())
        # The quotas were reached (the flood did load the queues) and never passed.
        assert any(monitor.peaks[k] == v for k, v in quotas.items() if k[2] == GPU), monitor.summary()


@pytest.mark.timeout(300)
@pytest.mark.asyncio
async def test_apiserver_restart_under_load_controller_recovers_by_itself(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    queues = four_queues()[:2]
    spec = TestbedSpec(nodes=[n for q in queues for n in pool_nodes(q.pool, 1, int(q.quota[GPU]) + 1)])
    jobs = flood(queues, per_queue=30)
    before, after = jobs[:50], jobs[50:]  # the last 10 are created once the API server is back
    quotas = {k: v for q in queues for k, v in q.quota_limits().items()}
    monitor = InvariantMonitor(quotas)
    began = time.monotonic()
    async with (
        own_testbed(tmp_path_factory.mktemp("testbed-a"), spec) as bed,
        KubeClient.from_kubeconfig(bed.kubeconfig) as kube,
    ):
        await install_crds(kube)
        await create_queues(kube, queues)
        async with controller_process(bed) as controller, monitor.running(kube):

            def context() -> str:
                return f"monitor: {monitor.summary()}\ncontroller log tail:\n{controller.log_tail(40)}"

            await create_jobs(kube, before, concurrency=16)
            await until("10 admissions", lambda: monitor.admitted_count() >= 10, 90, context)
            admitted_at_restart = monitor.admitted_count()
            await asyncio.to_thread(bed.restart, "kube-apiserver")
            assert controller.process is not None
            assert controller.process.poll() is None, context()
            await create_jobs(kube, after, concurrency=16, within=60)
            await until(
                "every Job to complete after the API server restart",
                lambda: monitor.complete_jobs() >= len(jobs),
                180,
                context,
            )
            finished, pending = await settle_final(kube, [q.namespace for q in queues], 30, context)
            await asyncio.sleep(1.0)
            assert controller.process.poll() is None, "the controller exited:\n" + context()
        monitor.assert_clean()
        print(
            f"\nkube-apiserver restarted after {admitted_at_restart} admissions; {finished} finished, "
            f"{pending} pending; {time.monotonic() - began:.0f}s; {monitor.summary()}"
        )
        assert (finished, pending) == (len(jobs), 0)
