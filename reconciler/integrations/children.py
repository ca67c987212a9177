"""Jobs whose controller is a job of another integration (a JobSet's Jobs): Kueue's child jobs.

Kueue v0.18.1 follows a job's controller reference to a kind it manages (FindAncestorJobManagedByKueue);
when that parent is managed (it names a queue, or manageJobsWithoutQueueName), the child job is
never admitted on its own: its parent's Workload holds the quota. The one thing done to a
child is suspending it while it runs without its parent's Workload being admitted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .base import Integration

__all__ = ["CHILD_SUSPENDED", "SUSPENDING_PARENT_ANNOTATION", "controller_parent", "suspend_child"]

# Kueue's Event on a child job it suspends (reason Suspended).
CHILD_SUSPENDED = "Kueue managed child job suspended"
# On a pod template of a parent that is never suspended itself (a serving kind): its pods are
# held at the admission gate for the parent's Workload; the value is the parent's framework.
SUSPENDING_PARENT_ANNOTATION = "kueue.x-k8s.io/pod-suspending-parent"


def controller_parent(obj: Any, integrations: Mapping[str, Integration]) -> tuple[Integration, str] | None:
    """The integration and name of `obj`'s controller, when that is a job of one of
    `integrations` (by kind), other than `obj`'s own kind."""
    for ref in obj.metadata.owner_references:
        if not ref.controller:
            continue
        integration = integrations.get(ref.kind)
        if integration is None or ref.api_version != integration.api_version or ref.kind == obj.kind:
            return None
        return integration, ref.name
    return None


def suspend_child(child: Integration, obj: Any, *, parent_admitted: bool) -> bool:
    """Whether a managed parent's child job must be suspended: it has not finished, runs, and
    its parent's Workload is missing or not admitted (Kueue's shouldSuspendChildJob)."""
    if child.finished(obj) is not None or child.is_suspended(obj):
        return False
    return not parent_admitted
