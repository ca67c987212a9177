"""ResourceSlice pools, device taints and shared counters, as the scheduler's DRA allocator uses them.

- Pools are gathered per node, from the slices that reach it: only a pool's newest generation
  is kept (older slices are outdated), and the pool counts only when all
  ``resourceSliceCount`` slices of that generation are there (complete) and no device name
  repeats in it (valid). While a driver is publishing a new generation, the pool's devices are
  not allocated on that node, and a request for all devices cannot be allocated there at all.
- A device taint with effect NoSchedule or NoExecute keeps the device from every request that
  does not tolerate it (other effects do not); a toleration matches a taint when its effect is
  empty or equal, its key empty or equal, and its operator is Exists, or Equal (or empty) with
  an equal value.
- Partitionable devices (KEP-4815): a device that consumes counters of a shared counter set of
  its pool can be allocated only while the counters left (the set's, less what allocated devices
  consume) cover its consumption.

Pure: no I/O, no clocks.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from fractions import Fraction

from reconciler.api.slices import DeviceTaint, ResourceSlice, SliceDevice

from ..primitives.quantity import QuantityError, parse_quantity
from .dra_devices import Tolerations

__all__ = [
    "BLOCKING_EFFECTS",
    "Counters",
    "PoolKey",
    "consumption",
    "fits_counters",
    "remaining_counters",
    "taint_text",
    "untolerated_taint",
    "usable_reach",
]

# (driver, pool name): a pool's identity.
PoolKey = tuple[str, str]
# (counter set, counter) -> amount.
Counters = dict[tuple[str, str], Fraction]
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def usable_reach(
    slices: Mapping[str, ResourceSlice], reach: Mapping[str, Iterable[str]]
) -> tuple[dict[str, list[str]], dict[str, list[PoolKey]]]:
    """Per slice, the nodes (of those it reaches, ``reach``) where its devices count; per node,
    the pools that do not count there (being updated: the newest generation incomplete; or
    invalid: a device name twice)."""
    by_node: dict[str, dict[PoolKey, list[str]]] = {}
    for name in sorted(reach):
        spec = slices[name].spec
        key, generation = (spec.driver, spec.pool.name), spec.pool.generation
        for node in reach[name]:
            pools = by_node.setdefault(node, {})
            kept = pools.get(key)
            if kept is None or generation > slices[kept[0]].spec.pool.generation:
                pools[key] = [name]
            elif generation == slices[kept[0]].spec.pool.generation:
                kept.append(name)
    usable: dict[str, list[str]] = {}
    unusable: dict[str, list[PoolKey]] = {}
    for node in sorted(by_node):
        for key, names in sorted(by_node[node].items()):
            wanted = slices[names[0]].spec.pool.resource_slice_count
            if len(names) != wanted or _repeats_a_device(slices[n] for n in names):
                unusable.setdefault(node, []).append(key)
                continue
            for name in names:
                usable.setdefault(name, []).append(node)
    return usable, unusable


def _repeats_a_device(slices: Iterable[ResourceSlice]) -> bool:
    seen: set[str] = set()
    for sl in slices:
        for device in sl.spec.devices:
            if device.name in seen:
                return True
            seen.add(device.name)
    return False


def _tolerates(toleration: tuple[str, str, str, str], taint: DeviceTaint) -> bool:
    key, operator, value, effect = toleration
    if effect and effect != taint.effect:
        return False
    if key and key != taint.key:
        return False
    if operator == "Exists":
        return True
    return operator in ("", "Equal") and value == taint.value


def untolerated_taint(device: SliceDevice, tolerations: Tolerations) -> DeviceTaint | None:
    """The first taint of the device that keeps it from a request with these tolerations."""
    for taint in device.taints:
        if taint.effect in BLOCKING_EFFECTS and not any(_tolerates(t, taint) for t in tolerations):
            return taint
    return None


def taint_text(taint: DeviceTaint) -> str:
    return f"{taint.key}={taint.value}:{taint.effect}" if taint.value else f"{taint.key}:{taint.effect}"


def _amount(raw: str) -> Fraction | None:
    try:
        return parse_quantity(raw)
    except QuantityError:
        return None  # the API server validates quantities; a bad one is not counted


def consumption(device: SliceDevice) -> Counters:
    """What the device consumes of its pool's counter sets."""
    out: Counters = {}
    for entry in device.consumes_counters:
        for name, counter in entry.counters.items():
            value = _amount(counter.value)
            if value is not None:
                slot = (entry.counter_set, name)
                out[slot] = out.get(slot, Fraction(0)) + value
    return out


def remaining_counters(
    pool: Iterable[ResourceSlice], allocated: Container[tuple[str, str, str]]
) -> Counters | None:
    """The counters of a pool's shared counter sets left after its allocated devices took theirs
    (may go below zero: nothing left); None when the pool shares no counters."""
    slices = list(pool)
    left: Counters = {}
    for sl in slices:
        for counter_set in sl.spec.shared_counters:
            for name, counter in counter_set.counters.items():
                value = _amount(counter.value)
                if value is not None:
                    left[(counter_set.name, name)] = value
    if not left:
        return None
    for sl in slices:
        for device in sl.spec.devices:
            if (sl.spec.driver, sl.spec.pool.name, device.name) not in allocated:
                continue
            for slot, value in consumption(device).items():
                if slot in left:
                    left[slot] -= value
    return left


def fits_counters(needs: Counters, left: Counters) -> bool:
    """Whether what a device consumes fits the counters left (counters of no set are not checked)."""
    return all(left[slot] >= value for slot, value in needs.items() if slot in left)
