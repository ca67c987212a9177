"""The webhooks this controller serves: path, name, kind, and the rule that decides.

Each route decodes the request's object (and old object on update) into its slim type and hands
it to a pure function of this package. The one thing a rule cannot know from the object, whether
the namespace has a LocalQueue named ``default``, is asked of ``Lookups`` (the server answers it
from the API). Names and paths are Kueue's, so the webhook configurations read the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import msgspec

from reconciler.api import ClusterQueue, Job, LocalQueue, ObjectMeta, ResourceFlavor, Workload
from reconciler.api.jobset import JobSet
from reconciler.api.lws import LeaderWorkerSet
from reconciler.api.pods import ManagedPod
from reconciler.core.model.workloads import QUEUE_NAME_LABEL
from reconciler.integrations.lwsgroup import SUSPENDING_PARENT_ANNOTATION

from .clusterqueues import validate_cluster_queue, validate_cluster_queue_update
from .fielderrors import FieldError
from .flavors import validate_resource_flavor
from .inuse import add_in_use_finalizer
from .jobs import (
    JobPolicy,
    default_job,
    needs_default_queue_lookup,
    needs_default_queue_lookup_on_update,
    validate_job,
    validate_job_update,
)
from .jobsets import default_jobset, jobset_needs_default_queue_lookup
from .leaderworkersets import default_lws, lws_needs_default_queue_lookup, validate_lws, validate_lws_update
from .localqueues import validate_local_queue, validate_local_queue_update
from .pods import (
    default_pod,
    namespace_managed,
    pod_is_managed,
    pod_warnings,
    validate_pod,
    validate_pod_update,
)
from .review import AdmissionRequest, Verdict, decode_object
from .workloads import validate_workload, validate_workload_update

__all__ = ["ROUTES", "Lookups", "Route", "handle"]

T = TypeVar("T")


class Lookups(Protocol):
    async def default_local_queue_exists(self, namespace: str) -> bool:
        """Whether the namespace has a LocalQueue named ``default``; raises when it cannot tell."""
        ...

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        """The Namespace's labels ({} when it is not found); raises when it cannot tell."""
        ...

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        """The metadata of a job of an enabled kind (None when it is not found)."""
        ...


Rule = Callable[[AdmissionRequest, JobPolicy, Lookups], Awaitable[Verdict]]


@dataclass(frozen=True)
class Route:
    path: str
    name: str  # the webhook's name in its configuration
    group: str
    version: str
    resource: str
    mutating: bool
    operations: tuple[str, ...]
    rule: Rule
    subresources: tuple[str, ...] = ()


def _decoded(request: AdmissionRequest, kind: type[T]) -> tuple[T | None, T | None, list[FieldError]]:
    new, errors = decode_object(request.object, kind)
    old = None
    if request.operation == "UPDATE":
        old, old_errors = decode_object(request.old_object, kind)
        errors += [] if old is not None else old_errors
    return new, old, errors


def _validator(
    kind: type[T],
    create: Callable[[T], list[FieldError]],
    update: Callable[[T, T], list[FieldError]] | None = None,
) -> Rule:
    async def rule(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
        new, old, errors = _decoded(request, kind)
        if new is None or errors:
            return Verdict.deny(errors)
        if old is not None:
            return Verdict.judge(update(new, old) if update is not None else create(new))
        return Verdict.judge(create(new))

    return rule


async def _default_queue(lookups: Lookups, needed: bool, namespace: str) -> bool | Verdict:
    """Whether the namespace has a default LocalQueue (False when the rule does not need to
    know); a failing Verdict when the API server cannot tell."""
    if not needed:
        return False
    try:
        return await lookups.default_local_queue_exists(namespace)
    except Exception as err:
        return Verdict.fail(f"cannot tell whether namespace {namespace} has a default LocalQueue: {err}")


async def _mutate_job(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    job, errors = decode_object(request.object, Job)
    if job is None:
        return Verdict.deny(errors)
    exists = await _default_queue(
        lookups, needs_default_queue_lookup(job, policy), request.namespace or job.metadata.namespace
    )
    if isinstance(exists, Verdict):
        return exists
    return Verdict.allow(default_job(job, policy, default_queue_exists=exists))


async def _mutate_jobset(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    jobset, errors = decode_object(request.object, JobSet)
    if jobset is None:
        return Verdict.deny(errors)
    exists = await _default_queue(
        lookups,
        jobset_needs_default_queue_lookup(jobset, policy),
        request.namespace or jobset.metadata.namespace,
    )
    if isinstance(exists, Verdict):
        return exists
    return Verdict.allow(default_jobset(jobset, policy, default_queue_exists=exists))


async def _mutate_lws(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    lws, errors = decode_object(request.object, LeaderWorkerSet)
    if lws is None:
        return Verdict.deny(errors)
    exists = await _default_queue(
        lookups,
        request.operation == "CREATE" and lws_needs_default_queue_lookup(lws, policy),
        request.namespace or lws.metadata.namespace,
    )
    if isinstance(exists, Verdict):
        return exists
    return Verdict.allow(default_lws(lws, policy, default_queue_exists=exists))


async def _validate_lws(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    """Kueue's LeaderWorkerSet validation: see `leaderworkersets.validate_lws_update`."""
    new, old, errors = _decoded(request, LeaderWorkerSet)
    if new is None or errors:
        return Verdict.deny(errors)
    if old is None:
        return Verdict.judge(validate_lws(new, policy))
    return Verdict.judge(validate_lws_update(new, old, policy))


async def _validate_jobset(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    """Kueue's JobSet validation: the queue-name rules of any job (see `_validate_job`)."""
    if not policy.jobset_enabled:
        return Verdict.allow()
    rules = JobPolicy(enabled=True, manage_without_queue_name=policy.manage_without_queue_name)
    new, old, errors = _decoded(request, JobSet)
    if new is None or errors:
        return Verdict.deny(errors)
    if old is None:
        return Verdict.judge(validate_job(new, rules))
    exists = await _default_queue(
        lookups,
        needs_default_queue_lookup_on_update(new, old, rules),
        request.namespace or new.metadata.namespace,
    )
    if isinstance(exists, Verdict):
        return exists
    return Verdict.judge(validate_job_update(new, old, rules, default_queue_exists=exists))


def _finalized(kind: type[ClusterQueue] | type[ResourceFlavor]) -> Rule:
    async def rule(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
        obj, errors = decode_object(request.object, kind)
        if obj is None:
            return Verdict.deny(errors)
        return Verdict.allow(add_in_use_finalizer(obj))

    return rule


async def _validate_job(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    new, old, errors = _decoded(request, Job)
    if new is None or errors:
        return Verdict.deny(errors)
    if old is None:
        return Verdict.judge(validate_job(new, policy))
    exists = await _default_queue(
        lookups,
        needs_default_queue_lookup_on_update(new, old, policy),
        request.namespace or new.metadata.namespace,
    )
    if isinstance(exists, Verdict):
        return exists
    return Verdict.judge(validate_job_update(new, old, policy, default_queue_exists=exists))


# How far up a pod's controllers are followed (Kueue's managedOwnersChainLimit).
_OWNER_CHAIN_LIMIT = 10


async def _managed_ancestor(meta: ObjectMeta, policy: JobPolicy, lookups: Lookups) -> bool:
    """Whether one of the pod's controllers, up the chain, is a job the controller manages
    (Kueue's FindAncestorJobManagedByKueue): its pods are its job's, not jobs of their own."""
    kinds = policy.pods.job_kinds
    for _ in range(_OWNER_CHAIN_LIMIT):
        ref = next((r for r in meta.owner_references if r.controller), None)
        if ref is None or (ref.api_version, ref.kind) not in kinds:
            return False
        owner = await lookups.object_meta(ref.api_version, ref.kind, meta.namespace, ref.name)
        if owner is None:
            return False
        if pod_is_managed(owner, policy.manage_without_queue_name):
            return True
        meta = owner
    return False


async def _mutate_pod(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    """Kueue's pod defaulting (framework `pod`): see `pods.default_pod`."""
    rules = policy.pods
    if not rules.enabled and not policy.lws_enabled:
        return Verdict.allow()
    pod, errors = decode_object(request.object, ManagedPod)
    if pod is None:
        return Verdict.deny(errors)
    if SUSPENDING_PARENT_ANNOTATION in pod.metadata.annotations:
        # Held for its parent's Workload whatever the namespace (Kueue's suspend-by-parent).
        return Verdict.allow(default_pod(pod, policy, default_queue_exists=False, managed_ancestor=False))
    if not rules.enabled:
        return Verdict.allow()
    namespace = request.namespace or pod.metadata.namespace
    meta = msgspec.structs.replace(pod.metadata, namespace=namespace)
    try:
        labels = None if rules.namespace_selector is None else await lookups.namespace_labels(namespace)
        if not namespace_managed(namespace, labels, rules):
            return Verdict.allow()
        ancestor = await _managed_ancestor(meta, policy, lookups)
        exists = False
        if not ancestor and not meta.labels.get(QUEUE_NAME_LABEL):
            exists = await lookups.default_local_queue_exists(namespace)
    except Exception as err:
        return Verdict.fail(f"cannot tell whether pod {namespace}/{meta.name} is to be managed: {err}")
    return Verdict.allow(default_pod(pod, policy, default_queue_exists=exists, managed_ancestor=ancestor))


async def _validate_pod(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    """Kueue's pod validation: see `pods.validate_pod` and `pods.validate_pod_update`."""
    if not policy.pods.enabled:
        return Verdict.allow()
    new, old, errors = _decoded(request, ManagedPod)
    if new is None or errors:
        return Verdict.deny(errors)
    warnings = tuple(pod_warnings(new, policy))
    if old is None:
        return dataclasses.replace(Verdict.judge(validate_pod(new, policy)), warnings=warnings)
    exists = await _default_queue(
        lookups,
        bool(old.metadata.labels.get(QUEUE_NAME_LABEL)) and not new.metadata.labels.get(QUEUE_NAME_LABEL),
        request.namespace or new.metadata.namespace,
    )
    if isinstance(exists, Verdict):
        return exists
    verdict = Verdict.judge(validate_pod_update(new, old, policy, default_queue_exists=exists))
    return dataclasses.replace(verdict, warnings=warnings)


_KUEUE = "kueue.x-k8s.io"
_CREATE_UPDATE = ("CREATE", "UPDATE")

ROUTES: tuple[Route, ...] = (
    Route("/mutate-batch-v1-job", "mjob.kb.io", "batch", "v1", "jobs", True, ("CREATE",), _mutate_job),
    Route(
        "/validate-batch-v1-job", "vjob.kb.io", "batch", "v1", "jobs", False, _CREATE_UPDATE, _validate_job
    ),
    Route(
        "/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        "mjobset.kb.io",
        "jobset.x-k8s.io",
        "v1alpha2",
        "jobsets",
        True,
        ("CREATE",),
        _mutate_jobset,
    ),
    Route(
        "/validate-jobset-x-k8s-io-v1alpha2-jobset",
        "vjobset.kb.io",
        "jobset.x-k8s.io",
        "v1alpha2",
        "jobsets",
        False,
        _CREATE_UPDATE,
        _validate_jobset,
    ),
    Route(
        "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
        "mleaderworkerset.kb.io",
        "leaderworkerset.x-k8s.io",
        "v1",
        "leaderworkersets",
        True,
        _CREATE_UPDATE,
        _mutate_lws,
    ),
    Route(
        "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset",
        "vleaderworkerset.kb.io",
        "leaderworkerset.x-k8s.io",
        "v1",
        "leaderworkersets",
        False,
        _CREATE_UPDATE,
        _validate_lws,
    ),
    Route("/mutate--v1-pod", "mpod.kb.io", "", "v1", "pods", True, ("CREATE",), _mutate_pod),
    Route("/validate--v1-pod", "vpod.kb.io", "", "v1", "pods", False, _CREATE_UPDATE, _validate_pod),
    Route(
        "/mutate-kueue-x-k8s-io-v1beta2-clusterqueue",
        "mclusterqueue.kb.io",
        _KUEUE,
        "v1beta2",
        "clusterqueues",
        True,
        ("CREATE",),
        _finalized(ClusterQueue),
    ),
    Route(
        "/mutate-kueue-x-k8s-io-v1beta2-resourceflavor",
        "mresourceflavor.kb.io",
        _KUEUE,
        "v1beta2",
        "resourceflavors",
        True,
        ("CREATE",),
        _finalized(ResourceFlavor),
    ),
    Route(
        "/validate-kueue-x-k8s-io-v1beta2-clusterqueue",
        "vclusterqueue.kb.io",
        _KUEUE,
        "v1beta2",
        "clusterqueues",
        False,
        _CREATE_UPDATE,
        _validator(ClusterQueue, validate_cluster_queue, validate_cluster_queue_update),
    ),
    Route(
        "/validate-kueue-x-k8s-io-v1beta2-localqueue",
        "vlocalqueue.kb.io",
        _KUEUE,
        "v1beta2",
        "localqueues",
        False,
        _CREATE_UPDATE,
        _validator(LocalQueue, validate_local_queue, validate_local_queue_update),
    ),
    Route(
        "/validate-kueue-x-k8s-io-v1beta2-resourceflavor",
        "vresourceflavor.kb.io",
        _KUEUE,
        "v1beta2",
        "resourceflavors",
        False,
        _CREATE_UPDATE,
        _validator(ResourceFlavor, validate_resource_flavor),
    ),
    Route(
        "/validate-kueue-x-k8s-io-v1beta2-workload",
        "vworkload.kb.io",
        _KUEUE,
        "v1beta2",
        "workloads",
        False,
        _CREATE_UPDATE,
        _validator(Workload, validate_workload, validate_workload_update),
        subresources=("status",),
    ),
)


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
