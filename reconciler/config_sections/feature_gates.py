"""``featureGates``: the one Kueue feature gate this controller acts on.

Kueue v0.18.1 charges a pod's extended resource (``nvidia.com/gpu: 2``) through the DeviceClass that
declares it in ``spec.extendedResourceName`` (KEP-5004) only behind its alpha gate
``KueueDRAIntegrationExtendedResource``, off by default. This controller reads the same gate from
the same field, so a Kueue Configuration charges alike here. The gate's deprecated spelling
``DRAExtendedResources`` is locked to false in Kueue v0.18.1 and refused the same way.
``AssignQueueLabelsForPods`` (beta, on by default) is always on here: an admitted Workload's pods
are labelled with their LocalQueue and ClusterQueue; turning it off is refused by name. Every other
gate has no effect here and is named at start-up (``ignored.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .fields import ConfigError, expect

__all__ = ["ACTED_ON", "EXTENDED_RESOURCE_GATE", "parse_feature_gates"]

EXTENDED_RESOURCE_GATE = "KueueDRAIntegrationExtendedResource"
_DEPRECATED = "DRAExtendedResources"
_DRA = "KueueDRAIntegration"
_QUEUE_LABELS = "AssignQueueLabelsForPods"
# The gates this controller reads; the others are accepted without effect.
ACTED_ON = frozenset({EXTENDED_RESOURCE_GATE, _DEPRECATED, _DRA, _QUEUE_LABELS})


def parse_feature_gates(raw: object) -> bool:
    """Whether extended resources backed by DRA are charged through their DeviceClass."""
    if raw is None:
        return False
    gates: Mapping[str, Any] = expect(
        raw, dict, "featureGates", "a map of feature gate names to true or false"
    )
    for name, value in gates.items():
        if not isinstance(value, bool):
            raise ConfigError(f"featureGates.{name}: Invalid value: {value!r}: must be true or false")
    if gates.get(_DEPRECATED) is True:
        raise ConfigError(
            f"featureGates.{_DEPRECATED}: Forbidden: deprecated and locked to false in Kueue v0.18.1; "
            f"set {EXTENDED_RESOURCE_GATE}: true instead"
        )
    extended = bool(gates.get(EXTENDED_RESOURCE_GATE, False))
    if extended and gates.get(_DRA) is False:
        raise ConfigError(
            f"featureGates.{EXTENDED_RESOURCE_GATE}: Invalid value: true: "
            f"{EXTENDED_RESOURCE_GATE} requires {_DRA} to be enabled; remove {_DRA}: false"
        )
    if gates.get(_DRA) is False:
        raise ConfigError(
            f"featureGates.{_DRA}: Forbidden: not supported by this controller: it charges DRA "
            "claims always (that is what it is for); remove it"
        )
    if gates.get(_QUEUE_LABELS) is False:
        raise ConfigError(
            f"featureGates.{_QUEUE_LABELS}: Forbidden: not supported by this controller: it labels an "
            "admitted Workload's pods with their queues always (Kueue's default); remove it"
        )
    return extended
