"""Charging one device request (or the chosen subrequest) of a mapped DeviceClass: its devices
as a count, and the device capacities its mapping charges. What the flavor decides (allocationMode
All, a capacity read from the ResourceSlices) becomes a `DeviceDemand`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ..primitives.podrequests import Amounts
from ..primitives.quantity import QuantityError, parse_quantity, to_amount
from .dra_problems import INVENTORY_FIX, DraProblem, field_error

__all__ = [
    "Capacities",
    "Charging",
    "DeviceAsk",
    "DeviceDemand",
    "MatchConstraint",
    "Requests",
    "Tolerations",
    "charge_device",
    "expressions",
    "tolerations_of",
]

# DeviceClass -> (device capacity name, quota resource) pairs charged besides the device count.
Capacities = Mapping[str, Sequence[tuple[str, str]]]
# A request's device tolerations: (key, operator, value, effect) each.
Tolerations = tuple[tuple[str, str, str, str], ...]


@dataclass(frozen=True, slots=True)
class DeviceAsk:
    """What one charged request (or chosen subrequest) needs from the devices of one pod, for the
    checks the device inventory makes: its class, count (None: allocationMode All), its own
    selectors and the device taints it tolerates."""

    request: str
    device_class: str
    resource: str
    count: int | None
    selectors: tuple[str, ...] = ()
    tolerations: Tolerations = ()
    # The chosen subrequest's name, when the request is a firstAvailable one.
    subrequest: str = ""


@dataclass(frozen=True, slots=True)
class MatchConstraint:
    """A claim's ``constraints[].matchAttribute``: its requests' devices share one attribute value."""

    claim: str
    attribute: str
    asks: tuple[DeviceAsk, ...]


@dataclass(frozen=True, slots=True)
class DeviceDemand:
    """A charge whose amount the flavor decides, from the devices published on its nodes.

    `count` devices per pod (None: allocationMode All, every device of the class on the
    pod's node); charged as that many devices of `resource`, or with `capacity`, as that
    capacity of each device: `per_device` when the request asks for an amount, else the
    largest capacity among the class's devices on the flavor's nodes.
    """

    resource: str
    device_class: str
    count: int | None
    capacity: str | None = None
    per_device: int | None = None
    # Where it comes from, for what is recorded on the Workload.
    label: str = ""
    # The request's own CEL selectors: only the class's devices they accept count.
    selectors: tuple[str, ...] = ()


@dataclass(slots=True)
class Requests:
    """The charge of one claim's device requests."""

    amounts: Amounts = field(default_factory=dict)
    devices: Amounts = field(default_factory=dict)
    choices: list[str] = field(default_factory=list)
    demands: list[DeviceDemand] = field(default_factory=list)
    asks: list[DeviceAsk] = field(default_factory=list)
    constraints: list[MatchConstraint] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Charging:
    """What charging a device request depends on besides the request."""

    mappings: Mapping[str, str]
    capacities: Capacities
    # The device inventory is on: allocationMode All and device capacities can be charged.
    sized: bool


def charge_device(
    into: Requests,
    *,
    device_class: str,
    logical: str,
    mode: str,
    count: int,
    capacity: object,
    selectors: object,
    path: str,
    prefix: str,
    label: str,
    charging: Charging,
    ask: tuple[str, str, Tolerations] = ("", "", ()),
) -> DraProblem | None:
    """Charge one request (or chosen subrequest) of a mapped DeviceClass: its devices, then the
    capacities its mapping charges. `path` is the request's, `capacity` its `capacity` field;
    `ask`: the request's name, the chosen subrequest's and the request's tolerations."""
    all_devices = mode == "All"
    cel = expressions(selectors)
    request, subrequest, tolerations = ask
    into.asks.append(
        DeviceAsk(
            request, device_class, logical, None if all_devices else count, cel, tolerations, subrequest
        )
    )
    if all_devices:
        into.demands.append(DeviceDemand(logical, device_class, None, label=label, selectors=cel))
        into.devices.setdefault(device_class, 0)
    else:
        into.amounts[logical] = into.amounts.get(logical, 0) + count
        into.devices[device_class] = into.devices.get(device_class, 0) + count
    wanted = capacity.get("requests") if isinstance(capacity, dict) else None
    requests = wanted if isinstance(wanted, dict) else {}
    for name, resource in charging.capacities.get(device_class, ()):
        asked = requests.get(name)
        if asked is None:
            if not charging.sized:
                return DraProblem(
                    field_error(
                        f"{path}.capacity.requests",
                        "Required value",
                        None,
                        prefix + f"DeviceClass {device_class} charges its devices' {name} capacity as "
                        f"{resource}, which needs the device inventory: {INVENTORY_FIX}, or request "
                        f"the amount in capacity.requests.{name}",
                    )
                )
            count_of = None if all_devices else count
            into.demands.append(DeviceDemand(resource, device_class, count_of, name, None, label, cel))
            continue
        try:
            per_device = to_amount(resource, parse_quantity(asked))
        except QuantityError as err:
            return DraProblem(
                field_error(f"{path}.capacity.requests.{name}", "Invalid value", asked, prefix + str(err))
            )
        if all_devices:
            into.demands.append(DeviceDemand(resource, device_class, None, name, per_device, label, cel))
        else:
            into.amounts[resource] = into.amounts.get(resource, 0) + count * per_device
    return None


def expressions(selectors: object) -> tuple[str, ...]:
    """The CEL expressions of a request's ``selectors`` (``[{cel: {expression: ...}}]``)."""
    out: list[str] = []
    for selector in selectors if isinstance(selectors, list) else []:
        cel = selector.get("cel") if isinstance(selector, dict) else None
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if isinstance(expression, str) and expression.strip():
            out.append(expression)
    return tuple(out)


_TOLERATION_FIELDS = ("key", "operator", "value", "effect")


def tolerations_of(raw: object) -> Tolerations:
    """A request's ``tolerations`` (structs or the API's dicts) as (key, operator, value, effect)."""
    out: list[tuple[str, str, str, str]] = []
    for t in raw if isinstance(raw, list) else []:
        fields = t if isinstance(t, dict) else {k: getattr(t, k, "") for k in _TOLERATION_FIELDS}
        key, operator, value, effect = (str(fields.get(k) or "") for k in _TOLERATION_FIELDS)
        out.append((key, operator, value, effect))
    return tuple(out)
