"""The two webhooks of a kind that is suspended until its Workload is admitted, as Kueue's job
webhooks are for each such kind.

Defaulting on create: an object without a queue name gets ``kueue.x-k8s.io/queue-name: default``
when its namespace has a LocalQueue named ``default``; one the controller manages (a queue name,
or ``manageJobsWithoutQueueName``) is stored with ``spec.suspend: true``, so its own controller
starts nothing before the Workload is admitted. Validation: the queue-name rules of any job.
Objects of a framework the Configuration does not enable pass unchanged. A kind whose suspend
flag lives elsewhere (``spec.runPolicy.suspend``) gives the JSON patch that sets it (`suspend_ops`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

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

__all__ = ["SuspendableKind", "default_suspendable"]

J = TypeVar("J", bound=QueuedObject)


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
    # The JSON patch that suspends one of its objects (its flag's place in the object).
    suspend_ops: Callable[[Any], list[PatchOp]] = spec_suspend_ops

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
        needed = policy.on(self.framework) and not queue_name(obj)
        exists = await default_queue(lookups, needed, request.namespace or obj.metadata.namespace)
        if isinstance(exists, Verdict):
            return exists
        return Verdict.allow(self.default(obj, policy, default_queue_exists=exists))

    async def validate(self, request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
        if not policy.on(self.framework):
            return Verdict.allow()
        new, old, errors = decoded(request, self.projection)
        if new is None or errors:
            return Verdict.deny(errors)
        if old is None:
            return Verdict.judge(validate_job(new))
        namespace = request.namespace or new.metadata.namespace
        exists = await default_queue(lookups, needs_default_queue_lookup_on_update(new, old), namespace)
        if isinstance(exists, Verdict):
            return exists
        return Verdict.judge(validate_job_update(new, old, default_queue_exists=exists))

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
