"""LocalQueues at the door: the ClusterQueue they point to is a valid name and never changes.

Kueue keeps these rules in its CRD (a name pattern and ``self == oldSelf``); they are checked here
too so a LocalQueue created against a slimmer CRD is held to the same rules.
"""

from __future__ import annotations

from reconciler.admission.fielderrors import IMMUTABLE, FieldError, Path, invalid, not_supported
from reconciler.admission.names import dns1123_subdomain
from reconciler.api import LocalQueue

__all__ = ["validate_local_queue", "validate_local_queue_update"]

_SPEC = Path("spec")
STOP_POLICIES = ("None", "Hold", "HoldAndDrain")


def validate_local_queue(lq: LocalQueue) -> list[FieldError]:
    errors: list[FieldError] = []
    if lq.spec.cluster_queue:
        errors += dns1123_subdomain(_SPEC.child("clusterQueue"), lq.spec.cluster_queue)
    if lq.spec.stop_policy is not None and lq.spec.stop_policy not in STOP_POLICIES:
        errors.append(not_supported(_SPEC.child("stopPolicy"), lq.spec.stop_policy, STOP_POLICIES))
    return errors


def validate_local_queue_update(new: LocalQueue, old: LocalQueue) -> list[FieldError]:
    errors = validate_local_queue(new)
    if new.spec.cluster_queue != old.spec.cluster_queue:
        errors.append(invalid(_SPEC.child("clusterQueue"), new.spec.cluster_queue, IMMUTABLE))
    return errors
