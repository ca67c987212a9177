"""The device inventory: what DRA drivers publish on each flavor's nodes, and what is allocated.

Fed with DeviceClasses, ResourceSlices, Nodes and ResourceClaims' allocations,
it answers, per ResourceFlavor and per DeviceClass mapped in
``deviceClassMappings``: how many devices are published on the nodes matching
the flavor's ``nodeLabels`` (a slice's ``nodeName``, or every node its
``nodeSelector`` or ``allNodes`` reaches), and how many of them are allocated.
A device belongs to a class when the class's CEL selectors accept it
(`device_cel`); which devices a class selects in a slice is remembered until
either changes, so a change of one slice costs the devices of that slice.

It also sizes the charges a flavor decides (`DeviceDemand`s): for
``allocationMode: All``, the most devices of the class on any one node of the
flavor (a pod gets every device of its node); for a mapping's ``capacity``,
the largest capacity among the class's devices on the flavor's nodes (which
device is allocated is not known at admission, so the largest is charged).

Pools, taints and shared counters are read as the scheduler's DRA allocator reads
them (`device_pools`): per node, only a pool's newest generation counts, and only
once all its slices are published; what a request can still get (`available_for`)
leaves out devices whose taints it does not tolerate and partitions the shared
counters left cannot hold beside the others (`device_fit`), and a claim's
``matchAttribute`` constraints are checked node by node (`constraint_misfit`).
Pure: no I/O, no clocks.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from reconciler.api import DeviceClass, ResourceClaim, ResourceFlavor
from reconciler.api.slices import ResourceSlice, SliceDevice

from ..primitives.quantity import format_amount, to_amount
from ..primitives.selectors import requirement_matches
from .device_cel import CompiledDeviceClass, compile_device_class, device_facts
from .device_fit import Availability, Candidate, Member, available, constraint_misfit
from .device_pools import Counters, PoolKey, remaining_counters, untolerated_taint, usable_reach
from .dra import DeviceAsk, DeviceDemand, MatchConstraint
from .dra_devices import Tolerations
from .inventory_reading import DeviceId, capacity_of, claim_devices, keep_largest, request_selectors

__all__ = ["DeviceId", "DeviceInventory", "FlavorDevices", "InventoryIndex", "claim_devices"]

Key = tuple[str, str]
# A slice and the names of the devices of one class in it.
NodeSlice = tuple[ResourceSlice, frozenset[str]]


@dataclass(frozen=True, slots=True)
class FlavorDevices:
    """One flavor's devices of one DeviceClass."""

    published: int = 0
    allocated: int = 0
    # Allocated to claims of pods this controller started (admitted workloads).
    allocated_managed: int = 0
    # Free devices a request without tolerations can still get at once: not allocated, no
    # NoSchedule/NoExecute taint, within the shared counters left (partitions).
    available: int = 0


@dataclass(frozen=True)
class DeviceInventory:
    """A snapshot: per (flavor, DeviceClass) and per (flavor, quota resource), the device counts."""

    by_class: Mapping[tuple[str, str], FlavorDevices] = field(default_factory=dict)
    by_resource: Mapping[tuple[str, str], FlavorDevices] = field(default_factory=dict)
    # Quota resource -> the DeviceClasses mapped to it (that exist or not).
    classes_of: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # Mapped DeviceClasses that do not exist, and the errors of those whose selectors do not compile.
    missing_classes: tuple[str, ...] = ()
    class_errors: tuple[str, ...] = ()
    # (flavor, DeviceClass) -> the most devices of the class on one node of the flavor.
    most_on_node: Mapping[tuple[str, str], int] = field(default_factory=dict)
    # (flavor, DeviceClass, capacity name) -> the largest such capacity of the class's devices there.
    largest_capacity: Mapping[tuple[str, str, str], Fraction] = field(default_factory=dict)

    # (flavor, DeviceClass) -> per node of the flavor, its slices and the class's devices in each.
    node_slices: Mapping[tuple[str, str], Mapping[str, tuple[NodeSlice, ...]]] = field(default_factory=dict)
    # (flavor, DeviceClass) -> the class's devices there (once each, with a node they are on).
    members: Mapping[tuple[str, str], tuple[Member, ...]] = field(default_factory=dict)
    # Devices allocated (not with admin access), and per pool the shared counters left.
    allocated_ids: frozenset[DeviceId] = frozenset()
    counters_left: Mapping[PoolKey, Counters] = field(default_factory=dict)
    _available: dict[tuple[object, ...], Availability] = field(
        default_factory=dict, compare=False, repr=False
    )
    # What requests with selectors of their own come to: (most on one node, largest capacity).
    _by_request: dict[tuple[object, ...], tuple[int, Fraction | None]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def size(self, flavor: str, demand: DeviceDemand) -> tuple[int, str] | str:
        """What a charge the flavor decides amounts to in ``flavor`` (per pod, with how it was
        reckoned), or why the flavor cannot take it."""
        cls = demand.device_class
        if cls in self.missing_classes:
            return (
                f"DeviceClass {cls} does not exist, so its devices cannot be counted for flavor {flavor}; "
                "create it or fix deviceClassMappings"
            )
        if any(e.startswith(f"DeviceClass {cls}:") for e in self.class_errors):
            return f"DeviceClass {cls} has selectors that do not compile, so it selects no device"
        reckoned = self._reckon(flavor, demand)
        if isinstance(reckoned, str):
            return reckoned
        most, largest = reckoned
        which = f"DeviceClass {cls}" + (" accepted by the request's selectors" if demand.selectors else "")
        if demand.count is None and most == 0:
            return (
                f"no device of {which} is published on the nodes of flavor {flavor} "
                "(allocationMode All needs at least one)"
            )
        count = most if demand.count is None else demand.count
        devices = f"{count} device(s) of DeviceClass {cls}"
        if demand.count is None:
            devices += f" (allocationMode All: the most on one node of flavor {flavor})"
        if demand.capacity is None:
            return count, f"{devices} charged as {count} {demand.resource}"
        resource = demand.resource
        if demand.per_device is not None:
            per_device, how = demand.per_device, "requested"
        else:
            if largest is None:
                return (
                    f"no device of {which} on the nodes of flavor {flavor} publishes capacity "
                    f"{demand.capacity} (charged as {resource}); fix the name in deviceClassMappings "
                    "capacity or request the amount in capacity.requests"
                )
            per_device, how = to_amount(resource, largest), f"the largest on flavor {flavor}'s nodes"
        amount = count * per_device
        return amount, (
            f"{devices} x {format_amount(resource, per_device)} {demand.capacity} ({how}) charged as "
            f"{format_amount(resource, amount)} {resource}"
        )

    def _reckon(self, flavor: str, demand: DeviceDemand) -> tuple[int, Fraction | None] | str:
        """(most devices on one node, largest capacity) of the class's devices in the flavor that
        the request's own selectors (if any) accept."""
        cls, capacity = demand.device_class, demand.capacity
        if not demand.selectors:
            largest = self.largest_capacity.get((flavor, cls, capacity)) if capacity else None
            return self.most_on_node.get((flavor, cls), 0), largest
        key = (flavor, cls, demand.selectors, capacity)
        known = self._by_request.get(key)
        if known is not None:
            return known
        compiled = request_selectors(demand.selectors)
        if compiled.errors:
            return "the request's selectors do not compile: " + "; ".join(compiled.errors)
        most, top = 0, Fraction(-1)
        for pairs in self.node_slices.get((flavor, cls), {}).values():
            on_node = 0
            for sl, names in pairs:
                driver = sl.spec.driver
                for device in sl.spec.devices:
                    if device.name not in names or not compiled.selects(device_facts(driver, device)):
                        continue
                    on_node += 1
                    value = capacity_of(driver, device, capacity) if capacity else None
                    if value is not None and value > top:
                        top = value
            most = max(most, on_node)
        known = self._by_request[key] = (most, top if top >= 0 else None)
        return known

    def devices(self, flavor: str, resource: str) -> FlavorDevices | None:
        """None when ``resource`` is not a DRA-mapped resource."""
        if resource not in self.classes_of:
            return None
        return self.by_resource.get((flavor, resource), FlavorDevices())

    def available_for(self, flavor: str, resource: str, tolerations: Tolerations) -> Availability:
        """The free devices of a resource's classes in ``flavor`` a request tolerating
        ``tolerations`` can still get at once (see `device_fit.available`)."""
        key = (flavor, resource, tolerations)
        known = self._available.get(key)
        if known is None:
            members = [
                m for c in self.classes_of.get(resource, ()) for m in self.members.get((flavor, c), ())
            ]
            known = available(members, self.allocated_ids, self.counters_left, tolerations)
            self._available[key] = known
        return known

    def constraint_misfit(self, flavor: str, constraint: MatchConstraint) -> str | None:
        """Why no node of ``flavor`` has free devices for a claim's constrained requests."""
        nodes = sorted(
            {n for a in constraint.asks for n in self.node_slices.get((flavor, a.device_class), {})}
        )
        return constraint_misfit(constraint, nodes, lambda ask, node: self._candidates(flavor, ask, node))

    def _candidates(self, flavor: str, ask: DeviceAsk, node: str) -> list[Candidate]:
        """The free devices of the request's class (and own selectors) on one node it tolerates."""
        compiled = request_selectors(ask.selectors) if ask.selectors else None
        out: list[Candidate] = []
        for sl, names in self.node_slices.get((flavor, ask.device_class), {}).get(node, ()):
            driver, pool = sl.spec.driver, sl.spec.pool.name
            for device in sl.spec.devices:
                device_id = (driver, pool, device.name)
                if device.name not in names or device_id in self.allocated_ids:
                    continue
                if untolerated_taint(device, ask.tolerations) is not None:
                    continue
                if compiled is None or compiled.selects(device_facts(driver, device)):
                    out.append((device_id, device))
        return out


@dataclass
class InventoryIndex:
    """The latest DeviceClasses, slices, node labels and claim allocations, kept incrementally."""

    classes: dict[str, CompiledDeviceClass] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    nodes: dict[str, Mapping[str, str]] = field(default_factory=dict)
    # Claim key -> (owner pod key or None, allocated devices).
    claims: dict[Key, tuple[Key | None, tuple[DeviceId, ...]]] = field(default_factory=dict)
    # (class, slice) -> names of the slice's devices the class selects.
    _members: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    # Owner pod -> how many of the recorded claims it owns.
    _owners: dict[Key, int] = field(default_factory=dict)

    def owns_claims(self, pod: Key) -> bool:
        return pod in self._owners

    def set_class(self, name: str, device_class: DeviceClass | None) -> None:
        self._forget(lambda cls, _slice: cls == name)
        if device_class is None:
            self.classes.pop(name, None)
        else:
            self.classes[name] = compile_device_class(device_class)

    def set_slice(self, name: str, resource_slice: ResourceSlice | None) -> None:
        self._forget(lambda _cls, sl: sl == name)
        if resource_slice is None:
            self.slices.pop(name, None)
        else:
            self.slices[name] = resource_slice

    def set_node(self, name: str, labels: Mapping[str, str] | None) -> None:
        if labels is None:
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = dict(labels)

    def set_claim(self, key: Key, claim: ResourceClaim | None) -> bool:
        """Record a claim's allocation; True when what it holds changed."""
        entry: tuple[Key | None, tuple[DeviceId, ...]] | None = None
        if claim is not None:
            owner = next((r.name for r in claim.metadata.owner_references if r.kind == "Pod"), None)
            entry = (None if owner is None else (key[0], owner), claim_devices(claim))
            if not entry[1]:
                entry = None  # nothing allocated: nothing to count
        previous = self.claims.get(key)
        if previous == entry:
            return False
        if previous is not None:
            self._count_owner(previous[0], -1)
            del self.claims[key]
        if entry is not None:
            self._count_owner(entry[0], 1)
            self.claims[key] = entry
        return True

    def _count_owner(self, owner: Key | None, step: int) -> None:
        if owner is None:
            return
        left = self._owners.get(owner, 0) + step
        if left > 0:
            self._owners[owner] = left
        else:
            self._owners.pop(owner, None)

    def _forget(self, which: Callable[[str, str], bool]) -> None:
        for key in [k for k in self._members if which(*k)]:
            del self._members[key]

    def _selected(self, class_name: str, slice_name: str) -> frozenset[str]:
        key = (class_name, slice_name)
        known = self._members.get(key)
        if known is None:
            compiled, sl = self.classes.get(class_name), self.slices[slice_name]
            known = frozenset(
                d.name
                for d in sl.spec.devices
                if compiled is not None and compiled.selects(device_facts(sl.spec.driver, d))
            )
            self._members[key] = known
        return known

    def _slice_nodes(self, sl: ResourceSlice) -> list[tuple[str, Mapping[str, str]]]:
        """The nodes (name, labels) a slice's devices are available on."""
        spec = sl.spec
        if spec.node_name:
            labels = self.nodes.get(spec.node_name)
            return [] if labels is None else [(spec.node_name, labels)]
        if spec.all_nodes:
            return list(self.nodes.items())
        if spec.node_selector is not None:
            terms = spec.node_selector.node_selector_terms
            return [
                (node, labels)
                for node, labels in self.nodes.items()
                if any(
                    all(requirement_matches(e.key, e.operator, e.values, labels) for e in t.match_expressions)
                    for t in terms
                )
            ]
        return []

    def compute(
        self,
        flavors: Mapping[str, ResourceFlavor],
        class_to_resource: Mapping[str, str],
        managed_pod: Callable[[Key], bool],
        capacities: Mapping[str, Collection[str]] | None = None,
    ) -> DeviceInventory:
        """Count, per flavor, the devices of every mapped DeviceClass on its nodes (and the most on
        one node); ``capacities``: per DeviceClass, the device capacities whose largest value on
        each flavor's nodes is wanted."""
        allocated = self._allocated(managed_pod)
        # Per node, each pool's newest generation, and only when complete (as the allocator).
        usable, updating = usable_reach(
            self.slices, {name: [n for n, _ in self._slice_nodes(sl)] for name, sl in self.slices.items()}
        )
        counters_left = self._counters_left(usable, allocated)
        # Per flavor, per slice it reaches: the flavor's nodes the slice's devices are on.
        slice_nodes = {name: self._flavor_reach(flavor, usable) for name, flavor in flavors.items()}
        by_class: dict[tuple[str, str], FlavorDevices] = {}
        most_on_node: dict[tuple[str, str], int] = {}
        node_slices: dict[tuple[str, str], dict[str, tuple[NodeSlice, ...]]] = {}
        largest: dict[tuple[str, str, str], Fraction] = {}
        members: dict[tuple[str, str], tuple[Member, ...]] = {}
        by_resource_ids: dict[tuple[str, str], set[DeviceId]] = {}
        classes_of: dict[str, list[str]] = {}
        for class_name, resource in sorted(class_to_resource.items()):
            classes_of.setdefault(resource, []).append(class_name)
            if class_name not in self.classes:
                continue
            wanted_capacities = (capacities or {}).get(class_name, ())
            for flavor_name, names in slice_nodes.items():
                found: dict[DeviceId, tuple[str, SliceDevice]] = {}
                per_node: dict[str, int] = {}
                on_nodes: dict[str, tuple[NodeSlice, ...]] = {}
                for name in names:
                    sl = self.slices[name]
                    selected = self._selected(class_name, name)
                    if not selected:
                        continue
                    nodes = slice_nodes[flavor_name][name]
                    for d in sl.spec.devices:
                        if d.name in selected:
                            found.setdefault((sl.spec.driver, sl.spec.pool.name, d.name), (nodes[0], d))
                    for node in nodes:
                        # allocationMode All cannot be allocated on a node whose pools are updating.
                        if node not in updating:
                            per_node[node] = per_node.get(node, 0) + len(selected)
                        on_nodes[node] = (*on_nodes.get(node, ()), (sl, selected))
                    if wanted_capacities:
                        keep_largest(largest, (flavor_name, class_name), sl, selected, wanted_capacities)
                where = (flavor_name, class_name)
                members[where] = tuple((i, node, d) for i, (node, d) in found.items())
                free = available(members[where], allocated, counters_left, ()).count
                by_class[where] = _count(found, allocated, free)
                most_on_node[where] = max(per_node.values(), default=0)
                node_slices[where] = on_nodes
                by_resource_ids.setdefault((flavor_name, resource), set()).update(found)
        by_resource = {
            (f, r): _count(
                ids,
                allocated,
                available(_union(members, f, classes_of[r]), allocated, counters_left, ()).count,
            )
            for (f, r), ids in by_resource_ids.items()
        }
        return DeviceInventory(
            by_class=by_class,
            by_resource=by_resource,
            classes_of={r: tuple(c) for r, c in classes_of.items()},
            missing_classes=tuple(sorted(c for c in class_to_resource if c not in self.classes)),
            class_errors=tuple(
                e for c in sorted(class_to_resource) if c in self.classes for e in self.classes[c].errors
            ),
            most_on_node=most_on_node,
            largest_capacity=largest,
            node_slices=node_slices,
            members=members,
            allocated_ids=frozenset(allocated),
            counters_left=counters_left,
        )

    def _allocated(self, managed_pod: Callable[[Key], bool]) -> dict[DeviceId, bool]:
        """The allocated devices, each with whether a pod this controller started holds it."""
        allocated: dict[DeviceId, bool] = {}
        for owner, devices in self.claims.values():
            managed = owner is not None and managed_pod(owner)
            for device in devices:
                allocated[device] = allocated.get(device, False) or managed
        return allocated

    def _flavor_reach(self, flavor: ResourceFlavor, usable: Mapping[str, list[str]]) -> dict[str, list[str]]:
        """Per slice reaching nodes of the flavor (where its pool counts), those nodes."""
        wanted = flavor.spec.node_labels
        reach: dict[str, list[str]] = {}
        for name in sorted(usable):
            nodes = [n for n in usable[name] if all(self.nodes[n].get(k) == v for k, v in wanted.items())]
            if nodes:
                reach[name] = nodes
        return reach

    def _counters_left(
        self, usable: Mapping[str, list[str]], allocated: Mapping[DeviceId, bool]
    ) -> dict[PoolKey, Counters]:
        """Per pool that shares counters, what its allocated devices left of them."""
        pools: dict[PoolKey, list[ResourceSlice]] = {}
        for name in sorted(usable):
            sl = self.slices[name]
            pools.setdefault((sl.spec.driver, sl.spec.pool.name), []).append(sl)
        out: dict[PoolKey, Counters] = {}
        for key, slices in pools.items():
            left = remaining_counters(slices, allocated)
            if left is not None:
                out[key] = left
        return out


def _union(
    members: Mapping[tuple[str, str], tuple[Member, ...]], flavor: str, classes: Iterable[str]
) -> list[Member]:
    return [m for c in classes for m in members.get((flavor, c), ())]


def _count(ids: Iterable[DeviceId], allocated: Mapping[DeviceId, bool], free: int) -> FlavorDevices:
    published = taken = managed = 0
    for device in ids:
        published += 1
        if device in allocated:
            taken += 1
            managed += allocated[device]
    return FlavorDevices(published, taken, managed, free)
