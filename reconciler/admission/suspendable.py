"""The two webhooks of a kind that is suspended until its Workload is admitted, as Kueue's job
webhooks are for each such kind.

Defaulting on create: an object without a queue name gets ``kueue.x-k8s.io/queue-name: default``
when its namespace has a LocalQueue named ``default``; one the controller manages (a queue name,
or ``manageJobsWithoutQueueName``) is stored with ``spec.suspend: true``, so its own controller
starts nothing before the Workload is admitted (a kind whose suspend flag lives elsewhere,
``spec.runPolicy.suspend``, gives the JSON patch that sets it: `suspend_ops`); an object whose
controller, up the chain, is a job the controller manages (Kueue's FindAncestorJobManagedByKueue:
a job of an enabled kind that names a queue, or any with ``manageJobsWithoutQueueName``) is its
parent's and is left as it is.
Validation: the queue-name rules of any job, and the kind's own rules (`rules`) for a managed
object, and a managed object's pod-template topology annotations refused by name
(`topology_door`). Objects of a framework the Configuration does not enable pass unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import msgspec

from reconciler.api import ObjectMeta
from reconciler.core.model.workloads import QUEUE_NAME_LABEL, workload_name_for_job

from .fielderrors import FieldError, forbidden
from .queue_rules import (
    JobPolicy,
    QueuedObject,
    default_queue_ops,
    needs_default_queue_lookup_on_update,
    queue_name,
    validate_job,
    validate_job_update,
)
from .review import AdmissionRequest, PatchOp, Verdict, decode_object
from .routes import Lookups, Route, decoded, default_queue
from .topology_door import topology_requests_refused

__all__ = [
    "ELASTIC_JOB_ANNOTATION",
    "ManagedAncestor",
    "SuspendableKind",
    "default_suspendable",
    "elastic_job_refused",
    "managed_ancestor",
    "managed_ancestor_of",
]

J = TypeVar("J", bound=QueuedObject)

ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
# How far up an object's controllers are followed (Kueue's managedOwnersChainLimit).
_OWNER_CHAIN_LIMIT = 10


@dataclass(frozen=True)
class ManagedAncestor:
    """The job up an object's controller chain that the controller manages: its Workload holds
    the quota of everything below it."""

    api_version: str
    kind: str
    meta: ObjectMeta

    @property
    def workload_name(self) -> str:
        group = self.api_version.rpartition("/")[0]
        return workload_name_for_job(self.meta.name, self.meta.uid, self.kind, group)


async def managed_ancestor_of(
    meta: ObjectMeta, namespace: str, policy: JobPolicy, lookups: Lookups
) -> ManagedAncestor | None:
    """The first of the object's controllers, up the chain, that is a job of an enabled kind the
    controller manages (it names a queue, or ``manageJobsWithoutQueueName``)."""
    for _ in range(_OWNER_CHAIN_LIMIT):
        ref = next((r for r in meta.owner_references if r.controller), None)
        if ref is None or (ref.api_version, ref.kind) not in policy.job_kinds:
            return None
        owner = await lookups.object_meta(ref.api_version, ref.kind, namespace, ref.name)
        if owner is None:
            return None
        if owner.labels.get(QUEUE_NAME_LABEL) or policy.manage_without_queue_name:
            return ManagedAncestor(ref.api_version, ref.kind, owner)
        meta = owner
    return None


async def managed_ancestor(meta: ObjectMeta, namespace: str, policy: JobPolicy, lookups: Lookups) -> bool:
    """Whether one of the object's controllers, up the chain, is a job the controller manages."""
    return await managed_ancestor_of(meta, namespace, policy, lookups) is not None


def elastic_job_refused(meta: ObjectMeta, gvk: str) -> list[FieldError]:
    """Kueue's refusal of ``kueue.x-k8s.io/elastic-job: "true"`` on a kind without elastic jobs
    (`gvk` as Go prints it: ``<group>/<version>, Kind=<Kind>``)."""
    if meta.annotations.get(ELASTIC_JOB_ANNOTATION) != "true":
        return []
    path = f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]"
    return [forbidden(path, f'elastic job is not supported for "{gvk}"')]


def _kind(raw: msgspec.Raw) -> str:
    try:
        kind = msgspec.json.decode(raw).get("kind", "")
    except (msgspec.DecodeError, AttributeError):
        return ""
    return kind if isinstance(kind, str) else ""


def spec_suspend_ops(obj: Any) -> list[PatchOp]:
    """The JSON patch that suspends an object whose flag is ``spec.suspend``."""
    return [{"op": "add", "path": "/spec/suspend", "value": True}]


def default_suspendable(
    obj: QueuedObject,
    policy: JobPolicy,
    *,
    default_queue_exists: bool,
    suspend_ops: Callable[[Any], list[PatchOp]] = spec_suspend_ops,
) -> list[PatchOp]:
    """The JSON patch that defaults an object being created (empty when nothing changes); the
    caller has checked its framework is enabled."""
    named = bool(queue_name(obj))
    ops = [] if named or not default_queue_exists else default_queue_ops(obj.metadata)
    if (named or bool(ops) or policy.manage_without_queue_name) and not obj.spec.suspend:
        ops += suspend_ops(obj)
    return ops


@dataclass(frozen=True)
class SuspendableKind(Generic[J]):
    """A kind's framework, its decoded type, where it is served and the webhooks' names: Kueue
    names them ``m<kind>.kb.io`` and ``v<kind>.kb.io`` at ``/mutate-<group>-<version>-<kind>``."""

    framework: str
    projection: type[J]
    group: str
    version: str
    resource: str
    name: str  # the lower-case kind, as the paths and names carry it
    # The kind's own rules for an object the controller manages, on create and update.
    rules: Callable[[J], list[FieldError]] | None = None
    # On update, when the kind's rules compare the old object with the new (else `rules`).
    update_rules: Callable[[J, J], list[FieldError]] | None = None
    # How many pods an object runs, and the field that says so: a managed parent's child may not
    # be changed to run more while its parent's Workload is admitted (beyond Kueue).
    size: Callable[[J], int] | None = None
    size_field: str = ""
    # The JSON patch that suspends one of its objects (its flag's place in the object).
    suspend_ops: Callable[[Any], list[PatchOp]] = spec_suspend_ops
    # Kueue v0.18.1 reads kueue.x-k8s.io/elastic-job on the kinds that set this (whose own rules
    # refuse it here); on any other kind its webhook refuses it, and so does this door.
    elastic_job_kind: bool = False
    # Its pods are placed in topology domains: the placement annotations pass.
    topology: bool = False

    def managed(self, obj: J, policy: JobPolicy) -> bool:
        return bool(queue_name(obj)) or policy.manage_without_queue_name

    def default(self, obj: J, policy: JobPolicy, *, default_queue_exists: bool) -> list[PatchOp]:
        if not policy.on(self.framework):
            return []
        return default_suspendable(
            obj, policy, default_queue_exists=default_queue_exists, suspend_ops=self.suspend_ops
        )

    async def mutate(self, request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
        obj, errors = decode_object(request.object, self.projection)
        if obj is None:
            return Verdict.deny(errors)
        namespace = request.namespace or obj.metadata.namespace
        if policy.on(self.framework) and obj.metadata.owner_references:
            try:
                if await managed_ancestor(obj.metadata, namespace, policy, lookups):
                    return Verdict.allow()  # its parent's: never suspended nor queued on its own
            except Exception as err:
                where = f"{namespace}/{obj.metadata.name}"
                return Verdict.fail(f"cannot tell whether the controller of {where} is managed: {err}")
        needed = policy.on(self.framework) and not queue_name(obj)
        exists = await default_queue(lookups, needed, namespace)
        if isinstance(exists, Verdict):
            return exists
        return Verdict.allow(self.default(obj, policy, default_queue_exists=exists))

    async def validate(self, request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
        if not policy.on(self.framework):
            return Verdict.allow()
        new, old, errors = decoded(request, self.projection)
        if new is None or errors:
            return Verdict.deny(errors)
        managed = self.managed(new, policy)
        topology = topology_requests_refused(request.object, placement=self.topology) if managed else []
        if not self.elastic_job_kind and ELASTIC_JOB_ANNOTATION in new.metadata.annotations:
            # The kind as the request names it (the object decoded again only where it does not).
            kind = request.kind.kind or _kind(request.object)
            topology += elastic_job_refused(new.metadata, f"{self.group}/{self.version}, Kind={kind}")
        if old is None:
            own = self.rules(new) if self.rules is not None and managed else []
            return Verdict.judge(own + topology + validate_job(new))
        if self.update_rules is not None:
            own = self.update_rules(new, old) if managed else []
        else:
            own = self.rules(new) if self.rules is not None and managed else []
        own += topology
        namespace = request.namespace or new.metadata.namespace
        if self.size is not None and new.metadata.owner_references and self.size(new) > self.size(old):
            refused = await self._beyond_charge(new, old, namespace, policy, lookups)
            if refused is not None:
                return refused
        exists = await default_queue(lookups, needs_default_queue_lookup_on_update(new, old), namespace)
        if isinstance(exists, Verdict):
            return exists
        return Verdict.judge(validate_job_update(new, old, default_queue_exists=exists) + own)

    async def _beyond_charge(
        self, new: J, old: J, namespace: str, policy: JobPolicy, lookups: Lookups
    ) -> Verdict | None:
        """A child of a managed job raised to run more pods while its parent's Workload is
        admitted: refused (the parent's Workload was charged for the child as it was)."""
        assert self.size is not None
        try:
            parent = await managed_ancestor_of(new.metadata, namespace, policy, lookups)
            if parent is None:
                return None
            workload = parent.workload_name
            admitted = await lookups.workload_admitted(namespace, workload)
        except Exception as err:
            where = f"{namespace}/{new.metadata.name}"
            return Verdict.fail(f"cannot tell whether the parent of {where} is admitted: {err}")
        if not admitted:
            return None
        detail = (
            f"would run {self.size(new)} pods where {self.size(old)} ran: its parent {parent.kind} "
            f"{namespace}/{parent.meta.name} is admitted (Workload {workload}) for its children as they "
            f"were; change the {parent.kind} instead, or suspend it first"
        )
        return Verdict.deny([forbidden(self.size_field or "spec", detail)])

    def routes(self, mutate_why: str = "", validate_why: str = "") -> tuple[Route, Route]:
        """The mutating webhook (on create) and the validating one (on create and update)."""
        path = f"{self.group.replace('.', '-')}-{self.version}-{self.name}"
        where = (self.group, self.version, self.resource)
        return (
            Route(
                f"/mutate-{path}",
                f"m{self.name}.kb.io",
                *where,
                True,
                ("CREATE",),
                self.mutate,
                why=mutate_why,
            ),
            Route(
                f"/validate-{path}",
                f"v{self.name}.kb.io",
                *where,
                False,
                ("CREATE", "UPDATE"),
                self.validate,
                why=validate_why,
            ),
        )
