"""Kueue Configuration fields this controller reads but does not act on, and those it refuses.

A field listed here is accepted (Kueue's file works unchanged) and named at start-up, with the
reason, in a log line and in the ``dra_quota_config_ignored_fields`` gauge. A field that would
change what a Workload is charged is refused instead: silently charging something else than
Kueue would is worse than not starting.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .feature_gates import ACTED_ON
from .fields import ConfigError, expect

__all__ = [
    "QUOTA_CHECK_STRATEGIES",
    "IgnoredField",
    "ignored_fields",
    "refuse_charging_fields",
    "top_level_ignored",
]

_ADMISSION = "admission and quota are decided by this controller alone"
# Top-level fields of both versions, with why each has no effect here.
_TOP_LEVEL: dict[str, str] = {
    "clientConnection": "API writes are paced by --write-concurrency, not by a QPS/burst limit",
    "leaderElection": "leader election is set on the command line (--leader-elect, --lease-duration, ...)",
    "metrics": "metrics are served at --metrics-bind-address; no custom labels or optional series",
    "health": "health probes are served at --health-probe-bind-address (/healthz, /readyz)",
    "pprofBindAddress": "this controller serves no profiling endpoint",
    "controller": "there is no controller-runtime: no per-kind concurrency or cache sync timeout",
    "tls": "the servers' minimum TLS version and cipher suites are not configurable",
    "multiKueue": "these are a MultiKueue manager's settings; this controller runs as a MultiKueue "
    "worker only, which has none (docs/multikueue.md)",
    "featureGates": "Kueue's feature gates other than KueueDRAIntegrationExtendedResource do not apply "
    "to this controller",
    "objectRetentionPolicies": "finished and deactivated Workloads are never deleted by this controller",
}
# Fields only one version has (Kueue decodes strictly: the other version refuses them).
_NO_VISIBILITY = (
    "the visibility API is served at --visibility-bind-address with --visibility-cert-dir "
    "(docs/visibility.md), not from the Configuration"
)
_BY_VERSION: dict[str, dict[str, str]] = {
    "v1beta1": {"queueVisibility": _NO_VISIBILITY},
    "v1beta2": {"visibilityServer": _NO_VISIBILITY},
}
_INTEGRATIONS: dict[str, str] = {
    "externalFrameworks": "only the registered integrations (integrations.frameworks) are implemented; "
    "Workloads of other owners are not created or managed",
    "podOptions": "Kueue v0.18.1 does not read it either: the pod webhook and integration follow "
    "managedJobsNamespaceSelector",
}
QUOTA_CHECK_STRATEGIES = ("BlockUndeclared", "IgnoreUndeclared")


@dataclass(frozen=True)
class IgnoredField:
    """A Configuration field that was given but has no effect: its path and the reason."""

    path: str
    reason: str


def top_level_ignored(version: str) -> frozenset[str]:
    """The top-level fields of `version` accepted without effect."""
    return frozenset(_TOP_LEVEL) | frozenset(_BY_VERSION[version])


def ignored_fields(doc: Mapping[str, Any], version: str) -> tuple[IgnoredField, ...]:
    """The given fields of `doc` (already checked for unknown ones) that have no effect, by path."""
    reasons = _TOP_LEVEL | _BY_VERSION[version]
    out = [
        IgnoredField(key, _reason(key, doc[key], reasons[key]))
        for key in doc
        if key in reasons and _without_effect(key, doc[key])
    ]
    integrations = doc.get("integrations")
    if isinstance(integrations, dict):
        out += [
            IgnoredField(f"integrations.{key}", _INTEGRATIONS[key])
            for key in integrations
            if key in _INTEGRATIONS and integrations[key] is not None
        ]
    return tuple(sorted(out, key=lambda f: f.path))


def _without_effect(key: str, value: object) -> bool:
    """A given field has no effect here: featureGates only when it names a gate not acted on."""
    return key != "featureGates" or not isinstance(value, dict) or bool(set(value) - ACTED_ON)


def _reason(key: str, value: object, reason: str) -> str:
    """The reason, naming the feature gates given that have no effect here."""
    if key != "featureGates" or not isinstance(value, dict):
        return reason
    return f"{reason}: " + ", ".join(sorted(str(g) for g in set(value) - ACTED_ON))


def _forbidden(path: str, why: str) -> ConfigError:
    return ConfigError(f"{path}: Forbidden: not supported by this controller: {why}")


def refuse_charging_fields(resources: Mapping[str, Any]) -> None:
    """Refuse the ``resources`` fields that would change what is charged (an empty list is fine).

    Kueue drops the resources named by ``excludeResourcePrefixes`` and rewrites requests with
    ``transformations`` before quota is checked; ``quotaCheckStrategy: IgnoreUndeclared`` lets a
    Workload in although a resource it asks for is not in its ClusterQueue. This controller
    charges every request as it is and keeps Workloads out that ask for a resource their
    ClusterQueue does not cover (Kueue's default, BlockUndeclared)."""
    for key in ("excludeResourcePrefixes", "transformations"):
        value = resources.get(key)
        if value is None:
            continue
        path = f"resources.{key}"
        items = expect(value, list, path, "a list")
        if items:
            raise _forbidden(path, "it would change what is charged; remove it")
    path = "resources.quotaCheckStrategy"
    strategy = resources.get("quotaCheckStrategy")
    if strategy is None or strategy == "BlockUndeclared":
        return
    if strategy == "IgnoreUndeclared":
        raise _forbidden(
            path,
            "IgnoreUndeclared would admit Workloads asking for resources their ClusterQueue does not "
            'cover; remove it or set "BlockUndeclared"',
        )
    raise ConfigError(
        f"{path}: Unsupported value: {strategy!r}: supported values: "
        + ", ".join(f'"{s}"' for s in QUOTA_CHECK_STRATEGIES)
    )
