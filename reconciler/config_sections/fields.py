"""What every section of the Configuration is checked with: the error type, field checks that
name the field, Go durations, and the Kubernetes name formats."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DNS_LABEL",
    "DNS_SUBDOMAIN",
    "QUALIFIED_NAME",
    "ConfigError",
    "check_unknown",
    "expect",
    "parse_duration",
]

QUALIFIED_NAME = re.compile(
    r"^(?:(?=.{1,253}/)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class ConfigError(ValueError):
    """A configuration that cannot be used. The message names the field and the fix."""


def parse_duration(value: object, path: str) -> float:
    """A Go duration such as "30m", "1h30m", "90s", "500ms", in seconds."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f'{path}: expected a duration such as "5m" or "90s", got {value!r}')
    text = value.strip()
    sign = -1.0 if text.startswith("-") else 1.0
    text = text.lstrip("+-")
    if text == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION_PART.finditer(text):
        if match.start() != pos:
            break
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if pos != len(text) or pos == 0:
        raise ConfigError(
            f"{path}: {value!r} is not a duration; use a number with a unit: ns, us, ms, s, m, h "
            '(e.g. "5m", "1h30m")'
        )
    return sign * total


def expect(value: object, kind: type | tuple[type, ...], path: str, what: str) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ConfigError(f"{path}: expected {what}, got {type(value).__name__} {value!r}")
    return value


def check_unknown(obj: Mapping[str, Any], allowed: set[str] | frozenset[str], path: str) -> None:
    for key in obj:
        if key not in allowed:
            known = ", ".join(sorted(allowed))
            where = f"{path}.{key}" if path else key
            raise ConfigError(f"{where}: unknown field; known fields here are: {known}")
