"""What the controller needs to know about a kind of job: one protocol, one module per kind.

The shape follows Kueue's GenericJob (jobframework): the pod sets a job asks quota for, whether
it is suspended, the patches that start it on its flavors and that stop it with its pod templates
restored, whether it is active, ready or finished. Everything here is pure: objects in, patches
and facts out; the runtime performs what these return.

A kind may also define `skip(obj) -> bool` (Kueue's optional JobWithSkip): a job it skips is left
alone entirely (`decide` returns Nothing for it), e.g. a RayJob on an existing cluster.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from reconciler.api import PodSet, Toleration
from reconciler.api.resources import Resource

__all__ = [
    "GroupedSets",
    "Integration",
    "Lookup",
    "Outcome",
    "Patch",
    "PodSetStart",
    "ReadsReferences",
    "Reference",
    "SuspendableJob",
    "TopologyPlacement",
    "references_of",
]

_EMPTY: Mapping[str, str] = {}


@dataclass(frozen=True, slots=True)
class PodSetStart:
    """What starting injects into one pod set's template: its flavors' node labels and
    tolerations, and the labels and annotations Kueue puts on its pods."""

    name: str
    node_selector: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    tolerations: Sequence[Toleration] = ()
    labels: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    annotations: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    # The pods admitted (fewer than asked for when the Workload was partially admitted).
    count: int | None = None
    # Scheduling gates its pods get (Kueue's topology gate for a pod set placed in topology domains).
    scheduling_gates: Sequence[str] = ()


@dataclass(frozen=True, slots=True)
class TopologyPlacement:
    """How a kind's pods are numbered when its pod sets are placed in topology domains (Kueue's
    podIndexLabel, subGroupIndexLabel and subGroupCount of a pod set's topology request): each
    pod's index within its Job (`index_label`) and, for a pod set run by several Jobs (a JobSet's
    replicated job), the Job's index (`group_label`) and the pod set's number of Jobs (`groups`,
    from the object and the pod set's name). The ungater releases pods by these ranks."""

    index_label: str
    group_label: str | None = None
    groups: Callable[[Any, str], int] | None = None


@dataclass(frozen=True, slots=True)
class Patch:
    """A merge patch for the job (or its `subresource`)."""

    body: bytes
    subresource: str | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    """A job has finished: whether it succeeded, and its message (for the Workload's Finished);
    `reason`: the Finished condition's reason when not Succeeded/Failed (e.g. OutOfSync)."""

    succeeded: bool
    message: str
    reason: str = ""


class Integration(Protocol):
    """One kind of job (Kueue's GenericJob, for the parts this controller acts on).

    `obj` is always an instance of `projection`, the decoded subset of the kind's API object.
    """

    @property
    def framework(self) -> str:
        """The Kueue framework name that enables it in `integrations.frameworks` (e.g. batch/job)."""

    @property
    def kind(self) -> str: ...

    @property
    def api_version(self) -> str: ...

    @property
    def resource(self) -> Resource:
        """Where the kind is served (group, version, plural)."""

    @property
    def projection(self) -> type[Any]:
        """The msgspec type its objects are decoded to."""

    @property
    def stop_deletes(self) -> bool:
        """Whether stopping deletes the object instead of suspending it (a pod cannot be
        suspended again once it runs: Kueue deletes it, and a deleted one's Workload finishes)."""

    @property
    def top_level(self) -> bool:
        """Whether it is always a job of its own, never another job's child (Kueue's TopLevelJob)."""

    @property
    def jobs_from_pods(self) -> bool:
        """Whether its jobs are groups made from the watched object and its pods, which are then
        seen from their creation (gated, before any pod set label)."""

    @property
    def topology_placement(self) -> TopologyPlacement | None:
        """How its pods are numbered when they are placed in topology domains (its Workload
        admitted with a topology assignment: started gated, released by the topology ungater);
        None: its pods are never placed so (the kind refuses the topology annotations)."""

    def release_patch(self, obj: Any) -> Patch | None:
        """The patch that removes the controller's finalizer from it (None: it carries none)."""

    def pod_sets(self, obj: Any) -> list[PodSet]:
        """The pod sets its Workload asks quota for, each with its name, template and count."""

    def is_suspended(self, obj: Any) -> bool: ...

    def start_patch(self, obj: Any, starts: Sequence[PodSetStart]) -> bytes:
        """The merge patch that unsuspends it, with each pod set's start injected."""

    def suspend_patch(self, obj: Any) -> bytes:
        """The merge patch that suspends it."""

    def restore_patch(self, obj: Any, recorded: Sequence[PodSet]) -> Patch | None:
        """The next patch towards giving a suspended job back the pod templates its Workload
        recorded (None: nothing to restore now)."""

    def restore_pending(self, obj: Any) -> bool:
        """Whether a suspended job still carries what starting injected (restore first)."""

    def is_active(self, obj: Any) -> bool:
        """Whether some of its pods still run."""

    def pods_ready(self, obj: Any) -> bool:
        """Whether as many pods as it asked for are ready."""

    def pods_ready_count(self, obj: Any) -> int:
        """Pods ready or succeeded by the job's own status (it covers succeeded pods already
        deleted; 0 when the kind does not count them)."""

    def finished(self, obj: Any) -> Outcome | None: ...

    def reclaimable_pods(self, obj: Any) -> Mapping[str, int]:
        """Per pod set, pods that finished and no longer need quota."""

    def owns(self, obj: Any, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        """Whether an object with this controller reference (a pod, a child) is this job's."""


class GroupedSets(Integration, Protocol):
    """An integration whose jobs are groups made from a watched set and its pods (`jobs_from_pods`):
    the Workload of each group is made from the set, its pods get Kueue's pod-group metadata and
    become the Workload's owners, and they are written one by one (a LeaderWorkerSet's groups, a
    StatefulSet's pods). A group has `metadata` (its own name), `event_meta` (the set's) and `pods`."""

    def set_of_pod(self, pod: Any) -> str | None:
        """The name of the set a pod belongs to (None: not one of this kind's)."""

    def groups_of(self, obj: Any, pods: Iterable[Any]) -> list[Any]:
        """The groups the set wants now, each with its pods."""

    def group_workload_name(self, group: Any) -> str: ...

    def in_group(self, pod: Any, workload_name: str) -> bool:
        """Whether the pod carries the group's metadata (then it owns the group's Workload)."""

    def pod_defaults(self, group: Any, pod: Any) -> bytes | None:
        """The merge patch giving the pod its group's metadata (None: it has it)."""

    def group_workload_shape(self, group: Any, workload: Any) -> Any:
        """Kueue's Workload for the group, from the one made as for a job named as the group."""


@dataclass(frozen=True, slots=True)
class Reference:
    """A kind whose objects a job's pod sets are made from (a TrainJob's runtime): watched and
    kept by the controller, and handed to the integration's `resolve`."""

    resource: Resource
    projection: type[Any]


# (resource, namespace, name) -> the kept object, or None ("" namespace: a cluster-scoped one).
Lookup = Callable[[Resource, str, str], Any]


@runtime_checkable
class ReadsReferences(Protocol):
    """An integration whose jobs need other objects to be answered for (Kueue reads a TrainJob's
    runtime on each reconcile). The controller keeps the referenced kinds' objects and stores
    each job as `resolve` returns it (again whenever a referenced object changes), so every
    question asked of the job is answered from it alone."""

    @property
    def references(self) -> tuple[Reference, ...]: ...

    def resolve(self, obj: Any, lookup: Lookup) -> Any:
        """The job with what it references filled in (idempotent)."""

    def unresolved(self, obj: Any) -> str | None:
        """Why a resolved job cannot be given a Workload yet (None: it can)."""


def references_of(integration: Integration) -> tuple[Reference, ...]:
    return integration.references if isinstance(integration, ReadsReferences) else ()


class SuspendableJob:
    """What most kinds share: stopped by suspending (not deleting), possibly another job's child,
    carrying no finalizer of this controller. Integrations of such kinds inherit these."""

    stop_deletes: bool = False
    top_level: bool = False
    jobs_from_pods: bool = False
    topology_placement: TopologyPlacement | None = None

    def release_patch(self, obj: Any) -> Patch | None:
        return None
