"""Kubernetes resource quantities in exact arithmetic.

Quantities are parsed into `Fraction`s, never floats. Quota arithmetic then
works on integer *amounts* the way Kueue does: CPU in millicores, every other
resource in whole units (rounded up), so "500m" cpu is 500 and "16Gi" memory
is 17179869184. Amounts are turned back into the strings the API shows with
`format_amount`, which follows the apimachinery canonical form.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from math import ceil

__all__ = [
    "QuantityError",
    "format_amount",
    "format_milli",
    "parse_quantity",
    "to_amount",
]

_BINARY_SUFFIXES = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXPONENT = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {0: "", **{v: k for k, v in _BINARY_SUFFIXES.items()}}

_QUANTITY = re.compile(
    r"^(?P<sign>[+-]?)(?P<num>(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$"
)

CPU = "cpu"
_BINARY_RESOURCES = frozenset({"memory", "ephemeral-storage"})


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int) -> Fraction:
    """Parse "16Gi", "500m", "1", "1e3", "0.5" into an exact Fraction."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    return _parse_text(str(value).strip())


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    """parse_quantity of a string (a pure function of it, asked for the same few quantities
    again and again: cached)."""
    value = text
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f'{value!r} is not a quantity (expected e.g. "1", "500m", "16Gi")')
    number = Fraction(match["num"])
    if match["exp"]:
        number *= Fraction(10) ** int(match["exp"][1:])
    suffix = match["suffix"] or ""
    if suffix in _BINARY_SUFFIXES:
        number *= 1024 ** _BINARY_SUFFIXES[suffix]
    else:
        number *= Fraction(10) ** _DECIMAL_SUFFIXES[suffix]
    return -number if match["sign"] == "-" else number


def to_amount(resource: str, quantity: Fraction) -> int:
    """The integer amount Kueue charges: millicores for cpu, units otherwise."""
    if resource == CPU:
        return ceil(quantity * 1000)
    return ceil(quantity)


def _is_binary(resource: str) -> bool:
    # Extended resources named for memory (example.com/gpu-memory, charged from device
    # capacities) read as memory does: 20Gi, not 21474836480.
    return resource in _BINARY_RESOURCES or resource.startswith("hugepages-") or resource.endswith("-memory")


@lru_cache(maxsize=4096)
def format_amount(resource: str, amount: int) -> str:
    """Render an amount the way the API (and Kueue's messages) show it."""
    if resource == CPU:
        return _format_decimal(Fraction(amount, 1000))
    if _is_binary(resource):
        return _format_binary(amount)
    return _format_decimal(Fraction(amount))


def format_milli(milli: int) -> str:
    """A milli-value as apimachinery's DecimalSI canonical form (Kueue's NewMilliQuantity)."""
    return _format_decimal(Fraction(milli, 1000))


def _format_decimal(value: Fraction) -> str:
    """apimachinery DecimalSI canonical form: exponent a multiple of 3."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    value = abs(value)
    # Smallest representable unit is nano; the API rounds up below it.
    nanos = ceil(value * 10**9)
    exponent = -9
    while nanos % 1000 == 0 and exponent < 18:
        nanos //= 1000
        exponent += 3
    return f"{sign}{nanos}{_DECIMAL_BY_EXPONENT[exponent]}"


def _format_binary(amount: int) -> str:
    """apimachinery BinarySI canonical form; small values fall back to decimal."""
    if -1024 < amount < 1024:
        return _format_decimal(Fraction(amount))
    sign = "-" if amount < 0 else ""
    value = abs(amount)
    exponent = 0
    while value % 1024 == 0 and exponent < 6:
        value //= 1024
        exponent += 1
    return f"{sign}{value}{_BINARY_BY_EXPONENT[exponent]}"
