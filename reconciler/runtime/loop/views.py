"""What the rest of the process reads of the reconciler (metrics, probes, tests): its state, by name."""

from __future__ import annotations

from reconciler.api import ClusterQueue, LocalQueue, Workload
from reconciler.config import Configuration
from reconciler.core.engine import Engine
from reconciler.observability.metrics import Metrics
from reconciler.runtime.shared.context import Context, ReconcilerStats
from reconciler.runtime.shared.podindex import PodIndex
from reconciler.runtime.shared.store import Key, Store
from reconciler.runtime.shared.timers import Timers

__all__ = ["ReconcilerViews"]


class ReconcilerViews:
    """Read (and, for config and metrics, replace) what the reconciler's context holds."""

    ctx: Context

    @property
    def config(self) -> Configuration:
        return self.ctx.config

    @config.setter
    def config(self, config: Configuration) -> None:
        self.ctx.config = config

    @property
    def core(self) -> Engine:
        return self.ctx.engine

    @property
    def store(self) -> Store:
        return self.ctx.store

    @property
    def workloads(self) -> dict[Key, Workload]:
        return self.ctx.store.workloads

    @property
    def cluster_queues(self) -> dict[str, ClusterQueue]:
        return self.ctx.store.cluster_queues

    @property
    def local_queues(self) -> dict[Key, LocalQueue]:
        return self.ctx.store.local_queues

    @property
    def timers(self) -> Timers[Key]:
        return self.ctx.timers

    @property
    def pod_index(self) -> PodIndex:
        return self.ctx.pod_index

    @property
    def stats(self) -> ReconcilerStats:
        return self.ctx.stats

    @property
    def metrics(self) -> Metrics:
        return self.ctx.metrics

    @metrics.setter
    def metrics(self, metrics: Metrics) -> None:
        self.ctx.metrics = metrics
