"""The webhooks this controller serves: those of Kueue's own objects, declared here, and those
of every registered kind of job, declared by its registration (`reconciler.integrations`).

Each route decodes the request's object (and old object on update) into its slim type and hands
it to a pure rule. Names and paths are Kueue's, so the webhook configurations read the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, Verdict, decode_object
from reconciler.admission.routes import Lookups, Route, Rule, validator
from reconciler.api import ClusterQueue, Cohort, LocalQueue, ResourceFlavor, Workload
from reconciler.integrations import REGISTRATIONS, Registration

from .clusterqueues import validate_cluster_queue, validate_cluster_queue_update
from .cohorts import validate_cohort
from .flavors import validate_resource_flavor
from .inuse import add_in_use_finalizer
from .localqueues import validate_local_queue, validate_local_queue_update
from .workloads import validate_workload, validate_workload_update

__all__ = ["KUEUE_ROUTES", "Lookups", "Route", "describe", "handle", "routes"]


def _finalized(kind: type[ClusterQueue] | type[ResourceFlavor]) -> Rule:
    async def rule(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
        obj, errors = decode_object(request.object, kind)
        if obj is None:
            return Verdict.deny(errors)
        return Verdict.allow(add_in_use_finalizer(obj))

    return rule


_KUEUE = "kueue.x-k8s.io"
_CREATE_UPDATE = ("CREATE", "UPDATE")


def _kueue(resource: str, mutating: bool, operations: tuple[str, ...], rule: Rule, **extra: Any) -> Route:
    kind = resource.removesuffix("s")
    verb = "mutate" if mutating else "validate"
    path = f"/{verb}-kueue-x-k8s-io-v1beta2-{kind}"
    return Route(
        path, f"{verb[0]}{kind}.kb.io", _KUEUE, "v1beta2", resource, mutating, operations, rule, **extra
    )


# The webhooks of Kueue's own objects.
KUEUE_ROUTES: tuple[Route, ...] = (
    _kueue(
        "clusterqueues",
        True,
        ("CREATE",),
        _finalized(ClusterQueue),
        why="Kueue's in-use finalizer on new ClusterQueues and ResourceFlavors.",
    ),
    _kueue("resourceflavors", True, ("CREATE",), _finalized(ResourceFlavor)),
    _kueue(
        "clusterqueues",
        False,
        _CREATE_UPDATE,
        validator(ClusterQueue, validate_cluster_queue, validate_cluster_queue_update),
    ),
    _kueue("cohorts", False, _CREATE_UPDATE, validator(Cohort, validate_cohort)),
    _kueue(
        "localqueues",
        False,
        _CREATE_UPDATE,
        validator(LocalQueue, validate_local_queue, validate_local_queue_update),
    ),
    _kueue("resourceflavors", False, _CREATE_UPDATE, validator(ResourceFlavor, validate_resource_flavor)),
    _kueue(
        "workloads",
        False,
        _CREATE_UPDATE,
        validator(Workload, validate_workload, validate_workload_update),
        subresources=("status",),
    ),
)


def routes(registrations: Iterable[Registration] | None = None) -> tuple[Route, ...]:
    """Every webhook served: each registered kind's (all of them: a rule lets the objects of a
    framework that is not enabled pass), then Kueue's own objects'."""
    chosen = REGISTRATIONS.values() if registrations is None else registrations
    return tuple(route for registration in chosen for route in registration.webhooks) + KUEUE_ROUTES


async def handle(route: Route, request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    """The route's verdict; a request for another kind (a misregistered webhook) is refused, not guessed."""
    if (request.resource.group, request.resource.resource) != (route.group, route.resource):
        found = f"{request.resource.group}/{request.resource.resource}"
        return Verdict.fail(f"{route.path} serves {route.group}/{route.resource}, not {found}", code=400)
    if request.operation not in route.operations:
        return Verdict.allow()
    return await route.rule(request, policy, lookups)


def describe(verdict: Verdict) -> dict[str, Any]:
    """A log line's fields for a verdict."""
    return {"allowed": verdict.allowed, "patch_ops": len(verdict.patch), "message": verdict.message}
