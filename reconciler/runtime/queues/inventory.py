"""Concern: the device inventory (``deviceInventory.mode`` Report or Enforce).

Watch events of DeviceClasses, ResourceSlices, Nodes and ResourceClaims go into
the core's `InventoryIndex`; after a batch that changed any of them (or the
flavors) the inventory is counted again and published on the context, where
the queue status (the DevicesCoverQuota condition), the metrics and, in
Enforce mode, the scheduler's gate read it. When what the flavors hold
changes, parked workloads are tried again.

It also checks ``deviceClassMappings`` against live objects: a mapped
DeviceClass that does not exist or whose selectors do not compile gets a
Warning Event on each ClusterQueue covering its resource, and a DeviceClass
that a ResourceClaimTemplate asks for but no mapping names gets one on the
template. Each is said once until it is fixed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import structlog

from reconciler.api import DeviceClass, ObjectMeta, ResourceClaim
from reconciler.api.resources import EVENTS
from reconciler.core.devices.dra_extended import ExtendedResources
from reconciler.core.devices.inventory import DeviceInventory, InventoryIndex
from reconciler.core.primitives.quantity import CPU
from reconciler.core.quota.inventory_admission import InventoryGate
from reconciler.core.quota.inventory_report import quota_gaps
from reconciler.observability.inventory_metrics import InventorySnapshot
from reconciler.runtime.shared.actions import PostEvent, WriteDone
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.events import event_body

__all__ = ["Inventory"]

log = structlog.get_logger(__name__)

Key = tuple[str, str]


class Inventory:
    def __init__(
        self, ctx: Context, extended_changed: Callable[[frozenset[str]], None] | None = None
    ) -> None:
        """`extended_changed`: told the extended resource names whose DeviceClass changed."""
        self.ctx = ctx
        self.index = InventoryIndex()
        self._classes: dict[str, DeviceClass] = {}
        self._extended_changed = extended_changed
        self._changed = True
        # What was said already: (object, problem) pairs, forgotten once the problem is gone.
        self._said: set[tuple[str, str, str]] = set()
        # DeviceClasses asked for by templates and not mapped (for the metrics).
        self._unmapped: set[str] = set()
        # The mappings (and charged capacities) the inventory was last counted with.
        self._mappings: tuple[dict[str, str], dict[str, tuple[tuple[str, str], ...]]] = ({}, {})

    @property
    def enabled(self) -> bool:
        return self.ctx.config.device_inventory.enabled

    # --- watch events -------------------------------------------------------------------

    def device_class(self, key: Key, obj: Any) -> None:
        self.index.set_class(key[1], obj)
        self._changed = True
        if obj is None:
            self._classes.pop(key[1], None)
        else:
            self._classes[key[1]] = obj
        if self.ctx.config.extended_resources:
            self._extended()

    def _extended(self) -> None:
        """Which DeviceClass serves each extended resource, again; the names whose class changed
        (appeared, went, or another class took them) are told, so the waiting Workloads asking
        for them are charged again."""
        before, after = self.ctx.extended_resources, ExtendedResources.of(self._classes.values())
        self.ctx.extended_resources = after
        changed = {n for n in before.names() | after.names() if before.class_for(n) != after.class_for(n)}
        if changed and self._extended_changed is not None:
            self._extended_changed(frozenset(changed))

    def resource_slice(self, key: Key, obj: Any) -> None:
        self.index.set_slice(key[1], obj)
        self._changed = True

    def node(self, key: Key, obj: Any) -> None:
        labels = None if obj is None else obj.metadata.labels
        if self.index.nodes.get(key[1]) != labels:
            self.index.set_node(key[1], labels)
            self._changed = True

    def claim(self, key: Key, claim: ResourceClaim | None) -> None:
        if self.enabled and self.index.set_claim(key, claim):
            self._changed = True

    def pod(self, key: Key) -> None:
        """A pod of ours came or went: the claims it owns move between held and allocated."""
        if self.enabled and self.index.owns_claims(key):
            self._changed = True

    def changed(self) -> None:
        """Flavors, templates or mappings changed."""
        self._changed = True

    # --- after a batch ------------------------------------------------------------------

    def refresh(self) -> None:
        if not self.enabled:
            return
        ctx = self.ctx
        mappings = (dict(ctx.config.class_to_resource), dict(ctx.config.class_capacities))
        if mappings != self._mappings:  # deviceClassMappings reloaded
            self._mappings = mappings
            self._changed = True
        if not self._changed:
            return
        self._changed = False
        pods = ctx.pod_index.pods
        capacities = {cls: [name for name, _ in caps] for cls, caps in ctx.config.class_capacities.items()}
        inventory = self.index.compute(
            ctx.engine.flavors, ctx.config.class_to_resource, pods.__contains__, capacities
        )
        previous = ctx.device_inventory
        ctx.device_inventory = inventory
        # allocationMode All and device capacities are charged by what the flavors' nodes hold.
        ctx.engine.scheduler.sizes = inventory
        if previous is None or (previous.largest_capacity, previous.node_slices) != (
            inventory.largest_capacity,
            inventory.node_slices,  # unchanged slices are the same objects: a cheap comparison
        ):
            ctx.engine.queues.retry()  # the charges the flavors decide may have changed
        if ctx.config.device_inventory.enforce:
            ctx.engine.scheduler.gate = InventoryGate(inventory)
            if previous is None or previous.by_resource != inventory.by_resource:
                ctx.engine.queues.retry()  # devices freed or published: parked workloads may fit
        ctx.dirty.queue_status = True
        self._check_mappings(inventory)

    def _check_mappings(self, inventory: DeviceInventory) -> None:
        ctx = self.ctx
        problems: dict[tuple[str, str, str], tuple[ObjectMeta, str, str, str]] = {}
        for name, cq in ctx.store.cluster_queues.items():
            model = ctx.engine.cache.cluster_queues.get(name)
            if model is None:
                continue
            covered = {r for g in model.groups for r in g.covered}
            for resource in sorted(covered & set(inventory.classes_of)):
                for cls in inventory.classes_of[resource]:
                    if cls in inventory.missing_classes:
                        message = (
                            f"DeviceClass {cls} is mapped to {resource} in deviceClassMappings but does "
                            "not exist; create it or fix the mapping"
                        )
                        problems[("cq", name, cls)] = (
                            cq.metadata,
                            "ClusterQueue",
                            "DeviceClassNotFound",
                            message,
                        )
                    for error in inventory.class_errors:
                        if error.startswith(f"DeviceClass {cls}:"):
                            problems[("cq", name, cls)] = (
                                cq.metadata,
                                "ClusterQueue",
                                "DeviceClassInvalid",
                                error,
                            )
        for (namespace, name), template in ctx.store.templates.items():
            for k, request in enumerate(template.spec.spec.devices.requests):
                cls = request.exactly.device_class_name if request.exactly is not None else ""
                if cls and cls not in ctx.config.class_to_resource:
                    message = (
                        f"spec.spec.devices.requests[{k}].exactly.deviceClassName: DeviceClass {cls} is not "
                        "mapped in deviceClassMappings, so its devices are not charged against quota; "
                        "add it to a mapping"
                    )
                    problems[(f"template/{namespace}", name, cls)] = (
                        template.metadata,
                        "ResourceClaimTemplate",
                        "DeviceClassNotMapped",
                        message,
                    )
        for said, (meta, kind, reason, message) in problems.items():
            if said not in self._said:
                log.warning("device class mapping problem", object=f"{kind} {meta.name}", reason=reason)
                self._emit(meta, kind, reason, message)
        self._said = set(problems)
        self._unmapped = {cls for (kind, _, cls) in problems if kind.startswith("template/")}

    def sample(self) -> InventorySnapshot | None:
        """The inventory gauges' numbers (metrics scrape; None while off or not counted yet)."""
        inventory = self.ctx.device_inventory
        if inventory is None or not self.enabled:
            return None
        devices = {fc: (d.published, d.allocated) for fc, d in inventory.by_class.items()}
        over: dict[tuple[str, str, str], float] = {}
        for name, model in self.ctx.engine.cache.cluster_queues.items():
            for gap in quota_gaps(model, inventory):
                amount = gap.over / 1000 if gap.resource == CPU else float(gap.over)
                over[(name, gap.flavor, gap.resource)] = amount
        problems = [(c, "not_found") for c in inventory.missing_classes]
        problems += [
            (e.split(":", 1)[0].removeprefix("DeviceClass "), "invalid") for e in inventory.class_errors
        ]
        problems += [(c, "unmapped") for c in self._unmapped]
        return InventorySnapshot(devices, over, problems)

    def _emit(self, meta: ObjectMeta, kind: str, reason: str, message: str) -> None:
        ctx = self.ctx
        api_version = "kueue.x-k8s.io/v1beta2" if kind == "ClusterQueue" else "resource.k8s.io/v1"
        body = event_body(
            api_version=api_version,
            kind=kind,
            meta=meta,
            event_type="Warning",
            reason=reason,
            message=message,
            now=ctx.clock(),
            instance=ctx.events.instance,
        )
        # Events about cluster-scoped objects live in "default", as kubectl looks for them.
        namespace = meta.namespace or "default"
        ctx.submit(PostEvent("event", EVENTS, namespace, body, on_done=_event_done))


def _event_done(done: WriteDone) -> None:
    if done.error is not None:
        log.debug("event not recorded", error=str(done.error))
