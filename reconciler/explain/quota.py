"""Quota in an explanation: the core's engine rebuilt from the live objects, and what it says.

The engine is fed as the controller feeds it, through the same feed (`reconciler.feed`):
flavors, ClusterQueues (a broken one set aside with its reason), Cohort objects (hierarchical
cohorts), LocalQueues and namespaces;
admitted Workloads charged from their `status.admission`, Workloads backing off
held, the others queued. One scheduling cycle then gives the target's verdict in
Kueue's words, and the ledger tells who holds the quota it needs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from reconciler.api import Workload
from reconciler.api.times import epoch
from reconciler.core.devices.dra_extended import ExtendedResources
from reconciler.core.devices.inventory import DeviceInventory
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import ClusterQueueModel
from reconciler.core.model.workloads import WorkloadInfo
from reconciler.core.primitives.quantity import QuantityError, format_amount
from reconciler.core.quota.cache import after_reclaim
from reconciler.core.quota.ledger import Ledger
from reconciler.core.scheduling.scheduler import Admit, Decision
from reconciler.core.status import condition
from reconciler.feed import QueueObjects, WorkloadSources, compile_for, feed_queue_objects, inventory_index

from .explanation import Holder, QuotaRow
from .state import ClusterState

__all__ = [
    "Ledgered",
    "backing_off",
    "fed_engine",
    "holds_quota",
    "load_engine",
    "queue_objects",
    "quota_rows",
    "to_fit",
]

Key = tuple[str, str]


def holds_quota(workload: Workload) -> bool:
    reserved = condition(workload.status.conditions, "QuotaReserved")
    return workload.status.admission is not None and reserved is not None and reserved.status == "True"


def is_finished(workload: Workload) -> bool:
    finished = condition(workload.status.conditions, "Finished")
    return finished is not None and finished.status == "True"


def backing_off(workload: Workload, now: str) -> float | None:
    """Seconds left of a requeue backoff (status.requeueState.requeueAt), None if none runs."""
    state = workload.status.requeue_state
    at, current = epoch(state.requeue_at if state else None), epoch(now)
    if at is None or current is None or at <= current or holds_quota(workload):
        return None
    return at - current


@dataclass
class Ledgered:
    """The engine after feeding, the compiled target, and the queue order before the cycle."""

    engine: Engine
    info: WorkloadInfo | None
    compile_error: str | None
    ahead: list[Key]
    decision: Decision | None


def _inventory(state: ClusterState, mappings: Mapping[str, str]) -> DeviceInventory:
    """The device inventory from the live classes, slices and nodes (allocations left out)."""
    index = inventory_index(state.device_classes, state.resource_slices, state.nodes)
    flavors = {f.metadata.name: f for f in state.flavors}
    names = {cls: [name for name, _ in caps] for cls, caps in state.capacities.items()}
    return index.compute(flavors, mappings, lambda pod: False, names)


def queue_objects(state: ClusterState) -> QueueObjects:
    return QueueObjects(
        state.flavors, state.cluster_queues, state.cohorts, state.local_queues, state.namespaces
    )


def fed_engine(
    state: ClusterState, target: Workload, mappings: Mapping[str, str]
) -> tuple[Engine, WorkloadInfo | str]:
    """The engine fed with every live object, before any cycle; and the target compiled (or why
    it cannot be)."""
    engine = Engine()
    engine.scheduler.fair_sharing = state.fair_sharing
    if state.afs is not None:
        engine.enable_admission_fair_sharing(state.afs)
    sized = state.inventory_on is not False
    if sized:
        engine.scheduler.sizes = _inventory(state, mappings)
    feed_queue_objects(engine, queue_objects(state))
    # Claims are fetched for the target's namespace only: elsewhere a shared claim reads as missing.
    sources = WorkloadSources(
        mappings,
        {(t.metadata.namespace, t.metadata.name): t for t in state.templates},
        {(c.metadata.namespace, c.metadata.name): c for c in state.claims},
        state.capacities,
        sized,
        ExtendedResources.of(state.device_classes) if state.extended_resources else None,
    )

    def compiled(workload: Workload) -> WorkloadInfo | str:
        try:
            return compile_for(engine, workload, sources)
        except (QuantityError, msgspec.ValidationError) as err:
            return f"spec.podSets: {err}"

    key = (target.metadata.namespace, target.metadata.name)
    others = [w for w in state.workloads if (w.metadata.namespace, w.metadata.name) != key]
    target_info: WorkloadInfo | str = ""
    for workload in [*others, target]:
        if is_finished(workload) or workload.metadata.deletion_timestamp:
            continue
        info = compiled(workload)
        if workload is target:
            target_info = info
        if isinstance(info, str):
            meta = workload.metadata
            info = WorkloadInfo(meta.namespace, meta.name, meta.uid, workload.spec.queue_name, 0, "")
            if not holds_quota(workload):
                continue  # cannot be queued; still charged if admitted
        if holds_quota(workload):
            charged = after_reclaim(workload)  # less the pods its job finished (reclaimablePods)
            assert charged is not None
            engine.add_workload(info, charged)
        elif not workload.spec.active:
            continue
        elif backing_off(workload, state.now) is not None:
            engine.hold(info)
        else:
            engine.add_workload(info)
    return engine, target_info


def load_engine(state: ClusterState, target: Workload, mappings: Mapping[str, str]) -> Ledgered:
    engine, target_info = fed_engine(state, target, mappings)
    key = (target.metadata.namespace, target.metadata.name)
    ahead: list[Key] = []
    queued_in = engine.queues.local_queues.get((target.metadata.namespace, target.spec.queue_name))
    queue = engine.queues.queues.get(queued_in) if queued_in is not None else None
    if queue is not None and key in queue.ordered_keys():
        order = queue.ordered_keys()
        ahead = order[: order.index(key)]
    decision: Decision | None = None
    for made in engine.schedule():
        if made.key == key:
            decision = made
    if isinstance(decision, Admit):
        engine.remove_workload(key)  # the quota shown is what it would get, not what it took
    if isinstance(target_info, str):
        return Ledgered(engine, None, target_info, ahead, decision)
    return Ledgered(engine, target_info, None, ahead, decision)


def _owner_job(workload: Workload | None) -> str | None:
    if workload is None:
        return None
    for ref in workload.metadata.owner_references:
        if ref.kind == "Job":
            return f"{workload.metadata.namespace}/{ref.name}"
    return None


def quota_rows(
    ledgered: Ledgered, model: ClusterQueueModel, workloads: Mapping[Key, Workload]
) -> tuple[list[QuotaRow], list[Holder], list[str]]:
    """Per pod set, requested resource and flavor: the quota; who holds what is missing; resources
    the ClusterQueue does not cover (as sentences with their fix)."""
    assert ledgered.info is not None
    ledger = ledgered.engine.ledger
    rows: list[QuotaRow] = []
    holders: dict[tuple[Key, str, str], Holder] = {}
    uncovered: list[str] = []
    for pod_set in ledgered.info.pod_sets:
        requests = pod_set.total()
        if "pods" in model.group_of:
            requests["pods"] = pod_set.count
        for resource in sorted(requests):
            wanted = requests[resource]
            index = model.group_of.get(resource)
            if index is None:
                if wanted:
                    uncovered.append(
                        f"ClusterQueue {model.name} has no quota for {resource} (pod set {pod_set.name} "
                        f"requests {format_amount(resource, wanted)}): add {resource} to the "
                        "coveredResources of one of its resourceGroups, with a nominalQuota per flavor"
                    )
                continue
            for quota in model.groups[index].flavors:
                fr = (quota.name, resource)
                nominal = quota.nominal.get(resource, 0)
                used = ledger.used(model.name, fr)
                free = nominal - used
                rows.append(
                    QuotaRow(
                        pod_set.name,
                        resource,
                        quota.name,
                        format_amount(resource, wanted),
                        format_amount(resource, nominal),
                        format_amount(resource, used),
                        format_amount(resource, max(free, 0)),
                        wanted <= free,
                    )
                )
                if wanted <= free:
                    continue
                for key in sorted(ledger.holders(model.name)):
                    charge = ledger.charge_of(key)
                    amount = charge.usage.get(fr, 0) if charge is not None else 0
                    if amount:
                        holders[(key, *fr)] = Holder(
                            f"{key[0]}/{key[1]}",
                            _owner_job(workloads.get(key)),
                            quota.name,
                            resource,
                            format_amount(resource, amount),
                        )
    return rows, list(holders.values()), uncovered


def to_fit(ledgered: Ledgered, model: ClusterQueueModel, holders: list[Holder]) -> list[str]:
    """For each requested resource that does not fit anywhere: what would have to finish, or change."""
    assert ledgered.info is not None
    ledger = ledgered.engine.ledger
    sentences: list[str] = []
    for pod_set in ledgered.info.pod_sets:
        for resource, wanted in sorted(pod_set.total().items()):
            index = model.group_of.get(resource)
            if index is None or not wanted:
                continue
            flavors = model.groups[index].flavors
            if any(
                wanted <= q.nominal.get(resource, 0) - ledger.used(model.name, (q.name, resource))
                for q in flavors
            ):
                continue  # fits in some flavor now
            possible = [q for q in flavors if wanted <= q.nominal.get(resource, 0)]
            if not possible:
                biggest = max((q.nominal.get(resource, 0) for q in flavors), default=0)
                sentences.append(
                    f"{resource}: pod set {pod_set.name} requests {format_amount(resource, wanted)}, "
                    f"more than the nominal quota of any flavor of ClusterQueue {model.name} (at most "
                    f"{format_amount(resource, biggest)}): nothing finishing makes it fit; raise "
                    "nominalQuota or request less"
                )
                continue
            quota = possible[0]
            needed = wanted - (
                quota.nominal.get(resource, 0) - ledger.used(model.name, (quota.name, resource))
            )
            chosen: list[Holder] = []
            freed = 0
            ranked = sorted(
                (h for h in holders if h.flavor == quota.name and h.resource == resource),
                key=lambda h: (-_amount(ledger, h), h.workload),
            )
            for holder in ranked:
                if freed >= needed:
                    break
                chosen.append(holder)
                freed += _amount(ledger, holder)
            names = " and ".join(h.name for h in chosen) or "the workloads holding it"
            verb = "finishes" if len(chosen) == 1 else "finish"
            sentences.append(
                f"{resource} in flavor {quota.name}: {format_amount(resource, needed)} more needed; "
                f"when {names} {verb}, it fits"
            )
    return sentences


def _amount(ledger: Ledger, holder: Holder) -> int:
    namespace, _, name = holder.workload.partition("/")
    charge = ledger.charge_of((namespace, name))
    return charge.usage.get((holder.flavor, holder.resource), 0) if charge is not None else 0
