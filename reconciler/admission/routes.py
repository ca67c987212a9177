"""A webhook route: its path, its name and object, and the rule that decides a request.

Routes are declared by whoever owns the object: an integration's registration declares the
routes of its kind, the webhook package those of Kueue's own objects. The rule is given the
request, the Configuration's `JobPolicy` and `Lookups`, the one place it asks the API what the
object cannot tell (whether a namespace has a LocalQueue named ``default``, its labels, the
metadata of a pod's controlling job).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from reconciler.api import ObjectMeta

from .fielderrors import FieldError
from .queue_rules import JobPolicy
from .review import AdmissionRequest, Verdict, decode_object

__all__ = ["Lookups", "Route", "Rule", "decoded", "default_queue", "validator"]

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

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        """Whether the Workload exists and holds quota (its QuotaReserved or Admitted condition
        is True); raises when it cannot tell."""
        ...


Rule = Callable[[AdmissionRequest, JobPolicy, Lookups], Awaitable[Verdict]]


@dataclass(frozen=True)
class Route:
    """One webhook as its configuration names it, and its rule. `why` is the comment the
    generated webhook configuration carries above it (`reconciler manifests`)."""

    path: str
    name: str  # the webhook's name in its configuration
    group: str
    version: str
    resource: str
    mutating: bool
    operations: tuple[str, ...]
    rule: Rule
    subresources: tuple[str, ...] = ()
    why: str = ""


def decoded(request: AdmissionRequest, kind: type[T]) -> tuple[T | None, T | None, list[FieldError]]:
    """The request's object and (on update) old object decoded as `kind`, with decoding errors."""
    new, errors = decode_object(request.object, kind)
    old = None
    if request.operation == "UPDATE":
        old, old_errors = decode_object(request.old_object, kind)
        errors += [] if old is not None else old_errors
    return new, old, errors


def validator(
    kind: type[T],
    create: Callable[[T], list[FieldError]],
    update: Callable[[T, T], list[FieldError]] | None = None,
) -> Rule:
    """A rule that decodes the object and judges it with `create`, or `update` on an update."""

    async def rule(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
        new, old, errors = decoded(request, kind)
        if new is None or errors:
            return Verdict.deny(errors)
        if old is not None:
            return Verdict.judge(update(new, old) if update is not None else create(new))
        return Verdict.judge(create(new))

    return rule


async def default_queue(lookups: Lookups, needed: bool, namespace: str) -> bool | Verdict:
    """Whether the namespace has a default LocalQueue (False when the rule does not need to
    know); a failing Verdict when the API server cannot tell."""
    if not needed:
        return False
    try:
        return await lookups.default_local_queue_exists(namespace)
    except Exception as err:
        return Verdict.fail(f"cannot tell whether namespace {namespace} has a default LocalQueue: {err}")
