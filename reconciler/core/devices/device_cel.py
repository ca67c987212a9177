"""Which devices a DeviceClass selects: its CEL selectors evaluated over published devices.

A DeviceClass (resource.k8s.io/v1) selects devices with CEL expressions over
``device.driver``, ``device.attributes["<domain>"].<name>`` and
``device.capacity["<domain>"].<name>``; a device belongs to the class when
every selector returns true. Expressions are compiled once per class with
cel-python (``celpy``); one that does not compile is reported with the class
and the field named, and such a class selects nothing.

Differences from the API server's CEL environment, kept small on purpose:
capacities are integers in base units (``quantity("16Gi")`` gives one, and
``compareTo``, ``isGreaterThan``, ``isLessThan``, ``asInteger`` work on them);
``version`` attributes are strings. A selector whose evaluation fails on a
device (a missing attribute) does not select it, as the scheduler would not
allocate it.

Evaluating CEL costs about half a millisecond a device, so results are
remembered per class by what the expressions can see: when every use of
``device.attributes`` and ``device.capacity`` has the plain form
``device.attributes["domain"].name``, devices that agree on the driver and on
those values share one evaluation (8 GPUs of 1000 nodes differing only in
their uuid cost one evaluation, not 8000). Otherwise every distinct device is
evaluated.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import celpy
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError

from reconciler.api import DeviceClass
from reconciler.api.slices import SliceDevice

from ..primitives.quantity import QuantityError, parse_quantity

__all__ = ["CompiledDeviceClass", "DeviceFacts", "compile_device_class", "device_facts"]


@dataclass(frozen=True, slots=True)
class DeviceFacts:
    """One published device as CEL sees it: attribute and capacity names qualified by domain."""

    driver: str
    attributes: Mapping[str, Mapping[str, object]]
    capacity: Mapping[str, Mapping[str, int]]


def _qualified(driver: str, name: str) -> tuple[str, str]:
    """``domain/name`` as written, else the driver's own domain (the API's rule)."""
    domain, sep, short = name.rpartition("/")
    return (domain, short) if sep else (driver, name)


def _attribute_value(value: Mapping[str, Any]) -> object:
    for kind in ("string", "version", "bool", "int"):
        if kind in value:
            return value[kind]
    return None


def device_facts(driver: str, device: SliceDevice) -> DeviceFacts:
    attributes: dict[str, dict[str, object]] = {}
    for name, value in device.attributes.items():
        domain, short = _qualified(driver, name)
        attributes.setdefault(domain, {})[short] = _attribute_value(value)
    capacity: dict[str, dict[str, int]] = {}
    for name, cap in device.capacity.items():
        domain, short = _qualified(driver, name)
        try:
            amount = parse_quantity(cap.value)
        except QuantityError:
            continue  # the API server validates quantities; a bad one simply cannot be compared
        capacity.setdefault(domain, {})[short] = -((-amount.numerator) // amount.denominator)
    return DeviceFacts(driver, attributes, capacity)


def _quantity(text: Any) -> celtypes.IntType:
    amount = parse_quantity(str(text))
    return celtypes.IntType(-((-amount.numerator) // amount.denominator))


def _compare_to(a: Any, b: Any) -> celtypes.IntType:
    left, right = int(a), int(b)
    return celtypes.IntType((left > right) - (left < right))


_FUNCTIONS: dict[str, Any] = {
    "quantity": _quantity,
    "compareTo": _compare_to,
    "isGreaterThan": lambda a, b: celtypes.BoolType(int(a) > int(b)),
    "isLessThan": lambda a, b: celtypes.BoolType(int(a) < int(b)),
    "asInteger": lambda a: celtypes.IntType(int(a)),
}
_ENV = celpy.Environment()


# device.attributes["domain"].name (or capacity), quotes of either kind.
_FIELD_USE = re.compile(
    r"""device\.(attributes|capacity)\[\s*(["'])([^"']*)\2\s*\]\.([A-Za-z_][A-Za-z0-9_]*)"""
)
_ANY_USE = re.compile(r"device\.(attributes|capacity)\b")
# The facts an expression reads: (kind, domain, name) triples; None when it may read anything.
Projection = tuple[tuple[str, str, str], ...] | None


def _projection(expressions: Sequence[str]) -> Projection:
    seen: set[tuple[str, str, str]] = set()
    for expression in expressions:
        uses = _FIELD_USE.findall(expression)
        if len(uses) != len(_ANY_USE.findall(expression)):
            return None
        seen.update((kind, domain, name) for kind, _, domain, name in uses)
    return tuple(sorted(seen))


def _memo_key(projection: Projection, device: DeviceFacts) -> Any:
    if projection is None:
        attributes = tuple(sorted((d, tuple(sorted(a.items()))) for d, a in device.attributes.items()))
        capacity = tuple(sorted((d, tuple(sorted(c.items()))) for d, c in device.capacity.items()))
        return (device.driver, attributes, capacity)
    values: list[object] = [device.driver]
    for kind, domain, name in projection:
        source = device.attributes if kind == "attributes" else device.capacity
        values.append((name in source.get(domain, {}), source.get(domain, {}).get(name)))
    return tuple(values)


@dataclass(frozen=True)
class CompiledDeviceClass:
    """A DeviceClass's selectors, compiled; ``errors`` name the class and field of each that is not."""

    name: str
    programs: Sequence[Any] = ()
    errors: tuple[str, ...] = ()
    projection: Projection = None
    _memo: dict[Any, bool] = field(default_factory=dict, compare=False, repr=False)

    @property
    def usable(self) -> bool:
        return not self.errors

    def selects(self, device: DeviceFacts) -> bool:
        """Every selector returns true for the device (a class without selectors takes every device)."""
        if self.errors:
            return False
        if not self.programs:
            return True
        key = _memo_key(self.projection, device)
        known = self._memo.get(key)
        if known is None:
            known = self._memo[key] = self._evaluate(device)
        return known

    def _evaluate(self, device: DeviceFacts) -> bool:
        activation = {
            "device": json_to_cel(
                {
                    "driver": device.driver,
                    "attributes": {d: dict(a) for d, a in device.attributes.items()},
                    "capacity": {d: dict(c) for d, c in device.capacity.items()},
                }
            )
        }
        for program in self.programs:
            try:
                result = program.evaluate(activation)
            except (CELEvalError, QuantityError, TypeError, ValueError, KeyError):
                return False
            if not (isinstance(result, celtypes.BoolType) and bool(result)):
                return False
        return True


def compile_device_class(device_class: DeviceClass) -> CompiledDeviceClass:
    """Compile each ``spec.selectors[i].cel.expression``; report each one that cannot be used."""
    name = device_class.metadata.name
    programs: list[Any] = []
    expressions: list[str] = []
    errors: list[str] = []
    for i, selector in enumerate(device_class.spec.selectors):
        path = f"spec.selectors[{i}].cel.expression"
        cel = selector.get("cel")
        expression = cel.get("expression") if isinstance(cel, dict) else None
        if not isinstance(expression, str) or not expression.strip():
            errors.append(f"DeviceClass {name}: {path}: Required value: a CEL expression is needed")
            continue
        try:
            programs.append(_ENV.program(_ENV.compile(expression), functions=_FUNCTIONS))
            expressions.append(expression)
        except CELParseError as err:
            detail = " ".join(str(err).split())
            errors.append(f"DeviceClass {name}: {path}: Invalid value: {expression!r}: {detail}")
    return CompiledDeviceClass(name, tuple(programs), tuple(errors), _projection(expressions))
