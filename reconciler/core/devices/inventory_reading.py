"""Reading what slices and claims hold for the device inventory: allocation results, device
capacities, and the request selectors compiled as a class of their own."""

from __future__ import annotations

from collections.abc import Collection
from fractions import Fraction
from functools import lru_cache

from reconciler.api import DeviceClass, DeviceClassSpec, ObjectMeta, ResourceClaim
from reconciler.api.slices import CapacityValue, ResourceSlice, SliceDevice

from ..primitives.quantity import QuantityError, parse_quantity
from .device_cel import CompiledDeviceClass, compile_device_class

__all__ = ["DeviceId", "capacity_of", "claim_devices", "keep_largest", "request_selectors"]

# (driver, pool, device): a device's identity, as allocation results name it.
DeviceId = tuple[str, str, str]


def claim_devices(claim: ResourceClaim) -> tuple[DeviceId, ...]:
    """The devices a claim's ``status.allocation.devices.results`` holds; a result with admin
    access does not hold its device (the allocator does not count it as allocated)."""
    allocation = claim.status.allocation or {}
    devices = allocation.get("devices")
    results = devices.get("results") if isinstance(devices, dict) else None
    out: list[DeviceId] = []
    for result in results if isinstance(results, list) else []:
        if isinstance(result, dict) and result.get("adminAccess") is not True:
            out.append(
                (str(result.get("driver", "")), str(result.get("pool", "")), str(result.get("device", "")))
            )
    return tuple(out)


@lru_cache(maxsize=256)
def request_selectors(expressions: tuple[str, ...]) -> CompiledDeviceClass:
    """A request's own selectors, compiled as a class of their own (cached by their text)."""
    selectors = [{"cel": {"expression": e}} for e in expressions]
    request = DeviceClass(metadata=ObjectMeta(name="(request)"), spec=DeviceClassSpec(selectors=selectors))
    return compile_device_class(request)


def capacity_of(driver: str, device: SliceDevice, name: str) -> Fraction | None:
    """What a request naming no amount of capacity `name` consumes of the device (see `unasked`)."""
    wanted = _qualified(driver, name)
    for key, capacity in device.capacity.items():
        if _qualified(driver, key) == wanted:
            return unasked(capacity)
    return None


def unasked(capacity: CapacityValue) -> Fraction | None:
    """What a request that names no amount of a capacity consumes of it, as the allocator reckons
    it (DRA consumable capacity): the ``requestPolicy.default`` when the driver sets one, else the
    whole capacity. None: a quantity that cannot be read (the API server validates them)."""
    policy = capacity.request_policy or {}
    default = policy.get("default")
    try:
        return parse_quantity(default if isinstance(default, (str, int)) else capacity.value)
    except QuantityError:
        return None


def _qualified(driver: str, name: str) -> tuple[str, str]:
    domain, sep, short = name.rpartition("/")
    return (domain, short) if sep else (driver, name)


def keep_largest(
    into: dict[tuple[str, str, str], Fraction],
    where: tuple[str, str],
    sl: ResourceSlice,
    selected: frozenset[str],
    names: Collection[str],
) -> None:
    """Keep, per capacity name, the largest value among a slice's selected devices."""
    driver = sl.spec.driver
    wanted = {_qualified(driver, n): n for n in names}
    for device in sl.spec.devices:
        if device.name not in selected:
            continue
        for key, capacity in device.capacity.items():
            name = wanted.get(_qualified(driver, key))
            if name is None:
                continue
            value = unasked(capacity)
            if value is None:
                continue  # the API server validates quantities; a bad one is not counted
            slot = (*where, name)
            if value > into.get(slot, Fraction(-1)):
                into[slot] = value
