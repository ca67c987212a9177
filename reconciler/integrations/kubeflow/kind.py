"""One replica-spec kind as the controller registers it: its integration, its two webhooks and
the API access the controller needs for it, made alike for every kind from its few facts."""

from __future__ import annotations

from typing import Any

from reconciler.api.resources import Resource

from ..registration import Access, Registration
from .door import ReplicaJobDoor, run_policy_suspend_ops
from .replicas import ReplicaJobIntegration

__all__ = ["replica_job_kind"]


def replica_job_kind(
    framework: str,
    resource: Resource,
    projection: type[Any],
    replica_field: str,
    order: tuple[str, ...],
    door_type: type[ReplicaJobDoor] = ReplicaJobDoor,
) -> tuple[ReplicaJobIntegration, ReplicaJobDoor, Registration]:
    """The integration, the webhooks (Kueue's ``m<kind>.kb.io`` and ``v<kind>.kb.io``) and the
    registration of a kind whose jobs have `replica_field` with replica types in `order`."""
    integration = ReplicaJobIntegration(framework, resource, projection, replica_field, order)
    name = resource.kind.lower()
    door = door_type(
        framework,
        projection,
        resource.group,
        resource.version,
        resource.plural,
        name,
        suspend_ops=run_policy_suspend_ops,
        order=order,
    )
    what = f"{resource.kind}s (integrations.frameworks: {framework})"
    registration = Registration(
        integration,
        webhooks=door.routes(
            mutate_why=f"Suspends a {resource.kind} that names a queue (and sets the default LocalQueue)\n"
            f"when it is created (integrations.frameworks: {framework}; otherwise it leaves them\n"
            "as they are).",
            validate_why=f"Kueue's queue-name rules for {resource.kind}s\n"
            f"(integrations.frameworks: {framework}).",
        ),
        access=(
            Access(
                resource.group,
                (resource.plural,),
                ("get", "list", "watch", "patch"),
                f"{what}: suspended, started and their\npod templates restored with a merge patch.",
            ),
            Access(
                resource.group,
                (f"{resource.plural}/finalizers",),
                ("update",),
                "Their Workloads block their deletion (OwnerReferencesPermissionEnforcement).",
            ),
        ),
    )
    return integration, door, registration
