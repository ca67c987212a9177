"""What the free devices of a flavor can still serve, device by device: taints the request does not
tolerate, shared counters (partitions of one device compete for them) and a claim's
``matchAttribute`` constraints (the devices of its requests share one attribute value, on one node).

``available`` counts the free devices a request can still get: not allocated, no untolerated
NoSchedule/NoExecute taint, and, for devices consuming shared counters, as many as the counters
left allow at once (smallest consumers first: the most partitions that fit; with several
counters per set this is a close estimate, not an exhaustive search). ``constraint_misfit``
tells why no node of a flavor can serve a constrained claim with its free devices.

Pure: no I/O, no clocks.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from reconciler.api.slices import SliceDevice

from .device_pools import Counters, PoolKey, consumption, fits_counters, taint_text, untolerated_taint
from .dra_devices import DeviceAsk, MatchConstraint, Tolerations

__all__ = ["Availability", "Candidate", "Member", "available", "constraint_misfit"]

# (driver, pool, device), the node it is on (the first, for a slice reaching several) and itself.
Member = tuple[tuple[str, str, str], str, SliceDevice]
# A free device a request could get on a node: its id and itself.
Candidate = tuple[tuple[str, str, str], SliceDevice]


@dataclass(frozen=True, slots=True)
class Availability:
    count: int
    # Per node: free devices kept away by a taint not tolerated, and one such taint.
    tainted: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    # Free devices left out because the shared counters do not allow them beside the others.
    by_counters: int = 0

    def notes(self) -> str:
        parts = [
            f"on node {node} {n} carry a taint the request does not tolerate ({taint})"
            for node, (n, taint) in sorted(self.tainted.items())
        ]
        if self.by_counters:
            parts.append(f"{self.by_counters} do not fit the shared counters left beside the others")
        return "; ".join(parts)


def available(
    members: Iterable[Member],
    allocated: Container[tuple[str, str, str]],
    left: Mapping[PoolKey, Counters],
    tolerations: Tolerations,
) -> Availability:
    """The free devices among ``members`` a request with ``tolerations`` can still get at once."""
    count, seen = 0, set()
    tainted: dict[str, tuple[int, str]] = {}
    partitions: dict[PoolKey, list[tuple[str, Counters]]] = {}
    for device_id, node, device in members:
        if device_id in seen or device_id in allocated:
            continue
        seen.add(device_id)
        taint = untolerated_taint(device, tolerations)
        if taint is not None:
            n, text = tainted.get(node, (0, taint_text(taint)))
            tainted[node] = (n + 1, text)
            continue
        pool = (device_id[0], device_id[1])
        needs = consumption(device)
        if needs and pool in left:
            partitions.setdefault(pool, []).append((device.name, needs))
        else:
            count += 1
    by_counters = 0
    for pool, devices in partitions.items():
        budget = dict(left[pool])
        for _, needs in sorted(devices, key=lambda d: (_weight(d[1], budget), d[0])):
            if fits_counters(needs, budget):
                count += 1
                for slot, value in needs.items():
                    if slot in budget:
                        budget[slot] -= value
            else:
                by_counters += 1
    return Availability(count, tainted, by_counters)


def _weight(needs: Counters, budget: Counters) -> Fraction:
    """How much of the counters left a device takes (its share of each, summed)."""
    total = Fraction(0)
    for slot, value in needs.items():
        have = budget.get(slot)
        if have is not None:
            total += value / have if have > 0 else Fraction(10**9)
    return total


def _attribute(driver: str, device: SliceDevice, name: str) -> tuple[tuple[str, Any], ...] | None:
    """A device's value of a fully qualified attribute (the driver's own attributes also by their
    short name), in a comparable form; None when it has none."""
    value = device.attributes.get(name)
    domain, sep, short = name.partition("/")
    if value is None and sep and domain == driver:
        value = device.attributes.get(short)
    return None if value is None else tuple(sorted(value.items()))


def constraint_misfit(
    constraint: MatchConstraint,
    nodes: Iterable[str],
    candidates: Callable[[DeviceAsk, str], list[Candidate]],
) -> str | None:
    """Why no node of ``nodes`` has free devices for all of the constraint's requests with one
    value of its attribute; None when one has. ``candidates``: a request's free devices on a node."""
    attribute, asks = constraint.attribute, constraint.asks
    checked = 0
    for node in nodes:
        checked += 1
        per_ask = [candidates(ask, node) for ask in asks]
        values = {
            v
            for found in per_ask
            for device_id, device in found
            if (v := _attribute(device_id[0], device, attribute))
        }
        if any(_serves(asks, per_ask, attribute, value) for value in sorted(values)):
            return None
    names = ", ".join(a.request + (f"/{a.subrequest}" if a.subrequest else "") for a in asks)
    return (
        f"{constraint.claim}: requests {names} need free devices with one value of {attribute} on "
        f"one node, and none of the flavor's {checked} node(s) has them"
    )


def _serves(
    asks: tuple[DeviceAsk, ...],
    per_ask: list[list[Candidate]],
    attribute: str,
    value: tuple[tuple[str, Any], ...],
) -> bool:
    """Whether the requests get distinct devices, all with ``value`` (taken in request order)."""
    used: set[tuple[str, str, str]] = set()
    for ask, found in zip(asks, per_ask, strict=True):
        matching = [d for d in found if d[0] not in used and _attribute(d[0][0], d[1], attribute) == value]
        if ask.count is None:
            # allocationMode All: every device the request selects on the node must match.
            if not found or len(matching) != len([d for d in found if d[0] not in used]):
                return False
            picked = matching
        else:
            if len(matching) < ask.count:
                return False
            picked = matching[: ask.count]
        used.update(d[0] for d in picked)
    return True
