"""``waitForPodsReady``: the PodsReady timeout, blockAdmission, recovery and the requeuing
strategy, with the defaults of each Configuration version."""

from __future__ import annotations

from dataclasses import dataclass

from .fields import ConfigError, check_unknown, expect, parse_duration

__all__ = ["WaitForPodsReady", "parse_wait_for_pods_ready"]


@dataclass(frozen=True)
class WaitForPodsReady:
    timeout_seconds: float
    block_admission: bool
    recovery_timeout_seconds: float | None
    requeuing_timestamp: str = "Eviction"
    backoff_limit_count: int | None = None
    backoff_base_seconds: int = 60
    backoff_max_seconds: int = 3600


def parse_wait_for_pods_ready(raw: object, version: str) -> WaitForPodsReady | None:
    path = "waitForPodsReady"
    if raw is None:
        raw = {}
    obj = expect(raw, dict, path, "an object")
    allowed = {"timeout", "blockAdmission", "recoveryTimeout", "requeuingStrategy"}
    if version == "v1beta1":
        allowed |= {"enable"}
    check_unknown(obj, allowed, path)
    if version == "v1beta1":
        enable = expect(obj.get("enable", False), bool, f"{path}.enable", "true or false")
        if not enable:
            return None
        timeout = parse_duration(obj.get("timeout", "5m"), f"{path}.timeout")
        block_default = True
    else:
        timeout = parse_duration(obj["timeout"], f"{path}.timeout") if "timeout" in obj else 0.0
        if timeout == 0:
            timeout = 30 * 60.0
        block_default = False
    if timeout <= 0:
        raise ConfigError(f'{path}.timeout: must be specified and greater than 0, e.g. "5m"')
    block = expect(obj.get("blockAdmission", block_default), bool, f"{path}.blockAdmission", "true or false")
    recovery: float | None = timeout
    if "recoveryTimeout" in obj:
        recovery = parse_duration(obj["recoveryTimeout"], f"{path}.recoveryTimeout")
        if recovery < 0:
            raise ConfigError(
                f'{path}.recoveryTimeout: must not be negative; use "0s" to disable recovery checking'
            )
    strategy = expect(obj.get("requeuingStrategy") or {}, dict, f"{path}.requeuingStrategy", "an object")
    spath = f"{path}.requeuingStrategy"
    check_unknown(
        strategy, {"timestamp", "backoffLimitCount", "backoffBaseSeconds", "backoffMaxSeconds"}, spath
    )
    timestamp = strategy.get("timestamp", "Eviction")
    if timestamp not in ("Eviction", "Creation"):
        raise ConfigError(
            f'{spath}.timestamp: Unsupported value: {timestamp!r}: supported values: "Creation", "Eviction"'
        )
    numbers: dict[str, int | None] = {}
    for key, default in (
        ("backoffLimitCount", None),
        ("backoffBaseSeconds", 60),
        ("backoffMaxSeconds", 3600),
    ):
        value = strategy.get(key, default)
        if value is not None:
            expect(value, int, f"{spath}.{key}", "a whole number")
            if value < 0:
                raise ConfigError(f"{spath}.{key}: must not be negative, got {value}")
        numbers[key] = value
    base = numbers["backoffBaseSeconds"] or 0
    top = numbers["backoffMaxSeconds"] or 0
    return WaitForPodsReady(
        timeout_seconds=timeout,
        block_admission=block,
        recovery_timeout_seconds=recovery if recovery else None,
        requeuing_timestamp=timestamp,
        backoff_limit_count=numbers["backoffLimitCount"],
        backoff_base_seconds=base,
        backoff_max_seconds=top,
    )
