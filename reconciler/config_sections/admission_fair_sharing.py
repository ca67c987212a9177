"""``admissionFairSharing``: Admission Fair Sharing (usage-based order within a ClusterQueue).

Both Configuration versions spell it the same way. The section's presence turns the feature on
(Kueue's AdmissionFairSharing gate is on by default since v0.15); a ClusterQueue then opts in with
``spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing``. Kueue's defaults and
checks: ``usageSamplingInterval`` 5m when absent or zero, ``usageHalfLifeTime`` 0 when absent
(usage is reset at every sample), neither negative, and no negative resource weight (a resource
without a weight counts with weight 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from .fields import ConfigError, check_unknown, expect, parse_duration

__all__ = ["DEFAULT_SAMPLING_SECONDS", "AdmissionFairSharingConfig", "parse_admission_fair_sharing"]

DEFAULT_SAMPLING_SECONDS = 300.0
_NEGATIVE = "must be greater than or equal to 0"


@dataclass(frozen=True)
class AdmissionFairSharingConfig:
    """Admission fair sharing is on: the decay, the sampling period and the resource weights."""

    usage_half_life_seconds: float = 0.0
    usage_sampling_seconds: float = DEFAULT_SAMPLING_SECONDS
    # Resource name -> weight; a resource not named weighs 1.
    resource_weights: Mapping[str, float] = field(default_factory=dict)


def _duration(obj: Mapping[str, object], name: str, path: str) -> float:
    raw = obj.get(name)
    if raw is None:
        return 0.0
    return parse_duration(raw, f"{path}.{name}")


def _weights(raw: object, path: str) -> dict[str, float]:
    if raw is None:
        return {}
    items = expect(raw, dict, path, "a map of resource name to weight")
    out: dict[str, float] = {}
    for name, weight in items.items():
        where = f"{path}[{name}]"
        value = expect(weight, (int, float), where, "a number")
        if isinstance(value, bool):
            raise ConfigError(f"{where}: expected a number, got bool {value!r}")
        if value < 0:
            raise ConfigError(f"{where}: Invalid value: {value!r}: {_NEGATIVE}")
        out[str(name)] = float(value)
    return out


def parse_admission_fair_sharing(raw: object) -> AdmissionFairSharingConfig | None:
    """The ``admissionFairSharing`` section (either version); None when the feature is off."""
    path = "admissionFairSharing"
    if raw is None:
        return None
    obj = expect(raw, dict, path, "an object")
    check_unknown(obj, {"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"}, path)
    half_life = _duration(obj, "usageHalfLifeTime", path)
    if half_life < 0:
        raise ConfigError(
            f"{path}.usageHalfLifeTime: Invalid value: {obj['usageHalfLifeTime']!r}: {_NEGATIVE}"
        )
    sampling = _duration(obj, "usageSamplingInterval", path) or DEFAULT_SAMPLING_SECONDS
    if sampling <= 0:
        raise ConfigError(
            f"{path}.usageSamplingInterval: Invalid value: {obj['usageSamplingInterval']!r}: "
            "must be greater than 0"
        )
    weights = _weights(obj.get("resourceWeights"), f"{path}.resourceWeights")
    return AdmissionFairSharingConfig(half_life, sampling, weights)
