"""ClusterQueue and LocalQueue status: written where it differs from what the API shows."""

from __future__ import annotations

import msgspec
import structlog

from reconciler.api import ClusterQueue, Cohort, LocalQueue
from reconciler.api.resources import CLUSTER_QUEUES, COHORTS, LOCAL_QUEUES
from reconciler.core.quota.inventory_report import DEVICES_COVER_QUOTA, devices_cover_quota
from reconciler.core.status import cluster_queue_status, cohort_status, local_queue_status, set_condition
from reconciler.runtime.shared.actions import MergePatch, WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context
from reconciler.runtime.shared.patches import (
    cluster_queue_status_patch,
    same_cluster_queue_status,
    same_local_queue_status,
    status_patch,
)

__all__ = ["QueueStatus"]

log = structlog.get_logger(__name__)


class QueueStatus:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        # ClusterQueues under a cohort cycle, with the cycle: logged once when it appears or ends.
        self._cycles: dict[str, str] = {}

    def _log_cycles(self) -> None:
        cache = self.ctx.engine.cache
        now = {name: problem for name in cache.cluster_queues if (problem := cache.cycle_problem(name))}
        for name, problem in sorted(now.items()):
            if self._cycles.get(name) != problem:
                log.warning(
                    "ClusterQueue admits nothing: the cohorts above it form a cycle; "
                    "give one of them no spec.parentName (or a parent outside the cycle)",
                    cluster_queue=name,
                    problem=problem,
                )
        for name in sorted(self._cycles.keys() - now.keys() & cache.cluster_queues.keys()):
            log.info("ClusterQueue is out of the cohort cycle", cluster_queue=name)
        self._cycles = now

    def sample_usage(self) -> None:
        """Admission fair sharing: each LocalQueue's usage sampled every usageSamplingInterval
        (Kueue's LocalQueue reconciler); its status shows the new value."""
        ctx = self.ctx
        if ctx.engine.afs is None:
            return
        now = ctx.wall()
        for namespace, name in ctx.store.local_queues:
            if ctx.engine.afs_sample(namespace, name, now):
                ctx.dirty.queue_status = True

    def flush(self) -> None:
        ctx = self.ctx
        self.sample_usage()
        if not ctx.dirty.queue_status:
            return
        ctx.dirty.queue_status = False
        self._log_cycles()
        now = ctx.clock()
        for name, cq in ctx.store.cluster_queues.items():
            desired = cluster_queue_status(ctx.engine, name, cq.status, now, cq.metadata.generation or None)
            model = ctx.engine.cache.cluster_queues.get(name)
            if ctx.device_inventory is not None and model is not None:
                covered = devices_cover_quota(model, ctx.device_inventory)
                conditions = set_condition(
                    desired.conditions, DEVICES_COVER_QUOTA, *covered, now, cq.metadata.generation or None
                )
                desired = msgspec.structs.replace(desired, conditions=conditions)
            if same_cluster_queue_status(desired, cq.status):
                continue
            patch = cluster_queue_status_patch(desired, cq.status)
            ctx.write(
                MergePatch(
                    "cq-status",
                    CLUSTER_QUEUES,
                    None,
                    name,
                    patch,
                    subresource="status",
                    on_done=self._cq_written,
                )
            )
        self._flush_cohorts()
        for (namespace, name), lq in ctx.store.local_queues.items():
            lq_desired = local_queue_status(
                ctx.engine, namespace, name, lq.status, now, lq.metadata.generation or None
            )
            if same_local_queue_status(lq_desired, lq.status):
                continue
            patch = status_patch(lq_desired)
            ctx.write(
                MergePatch(
                    "lq-status",
                    LOCAL_QUEUES,
                    namespace,
                    name,
                    patch,
                    subresource="status",
                    on_done=self._lq_written,
                )
            )

    def _flush_cohorts(self) -> None:
        """Cohort objects' status.fairSharing, while fair sharing is on (or still shown after)."""
        ctx = self.ctx
        for name, cohort in ctx.store.cohorts.items():
            desired = cohort_status(ctx.engine, name)
            if desired.fair_sharing == cohort.status.fair_sharing:
                continue
            patch = msgspec.json.encode(
                {"status": {"fairSharing": msgspec.to_builtins(desired.fair_sharing)}}
            )
            ctx.write(
                MergePatch(
                    "cohort-status",
                    COHORTS,
                    None,
                    name,
                    patch,
                    subresource="status",
                    on_done=self._cohort_written,
                )
            )

    def _cohort_written(self, done: WriteDone) -> None:
        if done.ok and done.body is not None:
            written = msgspec.json.decode(done.body, type=Cohort)
            self.ctx.store.cohorts[written.metadata.name] = written
        elif done.error is not None:
            self.ctx.dirty.queue_status = True
            self.ctx.write_failed(done, expected=EXPECTED_MISSES)

    def _cq_written(self, done: WriteDone) -> None:
        if done.ok and done.body is not None:
            written = msgspec.json.decode(done.body, type=ClusterQueue)
            self.ctx.store.cluster_queues[written.metadata.name] = written
        elif done.error is not None:
            self.ctx.dirty.queue_status = True
            self.ctx.write_failed(done, expected=EXPECTED_MISSES)

    def _lq_written(self, done: WriteDone) -> None:
        if done.ok and done.body is not None:
            written = msgspec.json.decode(done.body, type=LocalQueue)
            self.ctx.store.local_queues[(written.metadata.namespace, written.metadata.name)] = written
        elif done.error is not None:
            self.ctx.dirty.queue_status = True
            self.ctx.write_failed(done, expected=EXPECTED_MISSES)
