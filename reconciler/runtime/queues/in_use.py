"""In-use finalizers, as Kueue keeps them: ``kueue.x-k8s.io/resource-in-use`` on every
ClusterQueue and ResourceFlavor.

The finalizer is added to each one that lacks it (the mutating webhooks add it at creation; this
is the fallback for objects made without them). A ClusterQueue being deleted is terminating: it
admits nothing new, and its finalizer is removed once no workload holds quota in it (the ledger,
which also counts admissions still being written). A ResourceFlavor being deleted keeps its
finalizer while any ClusterQueue (terminating ones included) lists it. The finalizer list is
written with the object's resourceVersion, so another writer's finalizers are never lost (409:
the object's next event checks it again). Objects waiting to be released are checked again on
every status tick and after every ClusterQueue event.
"""

from __future__ import annotations

import msgspec
import structlog

from reconciler.api import ClusterQueue, ObjectMeta, ResourceFlavor
from reconciler.api.resources import CLUSTER_QUEUES, RESOURCE_FLAVORS
from reconciler.core.model.workloads import RESOURCE_IN_USE_FINALIZER
from reconciler.kube import Conflict
from reconciler.runtime.shared.actions import MergePatch, Purpose, WriteDone
from reconciler.runtime.shared.context import EXPECTED_MISSES, Context

__all__ = ["RESOURCE_IN_USE", "InUse"]

log = structlog.get_logger(__name__)

RESOURCE_IN_USE = RESOURCE_IN_USE_FINALIZER


def finalizer_patch(meta: ObjectMeta, finalizers: list[str]) -> bytes:
    return msgspec.json.encode(
        {"metadata": {"finalizers": finalizers, "resourceVersion": meta.resource_version}}
    )


class InUse:
    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self._writing: set[tuple[Purpose, str]] = set()
        self._waiting: set[tuple[Purpose, str]] = set()  # being deleted, still in use

    def check_all(self) -> None:
        for name in list(self.ctx.store.cluster_queues):
            self.cluster_queue(name)
        for name in list(self.ctx.engine.flavors):
            self.flavor(name)

    def recheck(self) -> None:
        """Look again at what waits to be released."""
        for purpose, name in list(self._waiting):
            if purpose == "cq-finalizer":
                self.cluster_queue(name)
            else:
                self.flavor(name)

    def cluster_queue(self, name: str) -> None:
        cq = self.ctx.store.cluster_queues.get(name)
        self._waiting.discard(("cq-finalizer", name))
        if cq is None:
            return
        busy = self.ctx.engine.ledger.holder_count(name)
        if cq.metadata.deletion_timestamp and busy:
            self._waiting.add(("cq-finalizer", name))
            return
        self._settle("cq-finalizer", cq, "no workload holds quota")

    def flavor(self, name: str) -> None:
        flavor = self.ctx.engine.flavors.get(name)
        self._waiting.discard(("flavor-finalizer", name))
        if flavor is None:
            return
        users = [
            cq_name
            for cq_name, cq in self.ctx.store.cluster_queues.items()
            if any(f.name == name for g in cq.spec.resource_groups for f in g.flavors)
        ]
        if flavor.metadata.deletion_timestamp and users:
            self._waiting.add(("flavor-finalizer", name))
            return
        self._settle("flavor-finalizer", flavor, "no ClusterQueue lists it")

    def _settle(self, purpose: Purpose, obj: ClusterQueue | ResourceFlavor, why: str) -> None:
        """Add the finalizer to a live object, remove it from a deleted one (no longer in use)."""
        meta = obj.metadata
        has = RESOURCE_IN_USE in meta.finalizers
        if bool(meta.deletion_timestamp) != has or (purpose, meta.name) in self._writing:
            return
        if meta.deletion_timestamp:
            finalizers = [f for f in meta.finalizers if f != RESOURCE_IN_USE]
        else:
            finalizers = [*meta.finalizers, RESOURCE_IN_USE]
        self._writing.add((purpose, meta.name))
        patch = finalizer_patch(meta, finalizers)
        if purpose == "cq-finalizer":
            action = MergePatch(purpose, CLUSTER_QUEUES, None, meta.name, patch, on_done=self._written)
        else:
            action = MergePatch(purpose, RESOURCE_FLAVORS, None, meta.name, patch, on_done=self._written)
        self.ctx.write(action)
        if meta.deletion_timestamp:
            log.info("in-use finalizer released", kind=action.resource.kind, name=meta.name, because=why)

    def _written(self, done: WriteDone) -> None:
        action = done.action
        assert isinstance(action, MergePatch)
        self._writing.discard((action.purpose, action.name))
        self.ctx.write_failed(done, expected=EXPECTED_MISSES)
        if isinstance(done.error, Conflict):
            # Its newer event may have come while this write was in flight: look again now.
            (self.cluster_queue if action.purpose == "cq-finalizer" else self.flavor)(action.name)
