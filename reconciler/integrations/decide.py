"""The one step the runtime takes for a job, decided from plain data (no I/O).

`decide` looks at a job (through its integration), its Workload and the writes still in
flight, and returns one step: create the Workload, start the job, suspend it, restore its pod
templates, finish the Workload, replace a Workload that no longer matches the job, or nothing.
The runtime performs the step and comes back when something changes.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from msgspec.structs import replace

from reconciler.api import Admission, PodSet, ResourceFlavor, Workload, pod_template_view
from reconciler.api.meta import LabelSelector
from reconciler.core.model.jobs import PODSET_LABEL
from reconciler.core.model.workloads import QUEUE_NAME_LABEL
from reconciler.core.primitives.selectors import label_selector_matches
from reconciler.core.scheduling.flavor_labels import admission_node_labels, admission_tolerations
from reconciler.core.topology.requests import PREFERRED, REQUIRED, UNCONSTRAINED
from reconciler.core.topology.ungate import TOPOLOGY_GATE, WORKLOAD_ANNOTATION

from .base import Integration, Outcome, Patch, PodSetStart
from .equivalence import MatchMemo, equivalent, group_equivalent
from .prebuilt import (
    OUT_OF_SYNC_MESSAGE,
    OUT_OF_SYNC_REASON,
    adoption_patch,
    controlled_elsewhere,
    prebuilt_name,
    worker_pod_labels,
)

__all__ = [
    "CLUSTER_QUEUE_POD_LABEL",
    "LOCAL_QUEUE_POD_LABEL",
    "PODSET_LABEL",
    "SYSTEM_NAMESPACE",
    "Adopt",
    "AwaitPrebuilt",
    "CreateWorkload",
    "DeleteMismatched",
    "Finish",
    "Known",
    "Nothing",
    "Release",
    "Restore",
    "Start",
    "Step",
    "Suspend",
    "UpdateMismatched",
    "decide",
    "expected_pod_sets",
    "is_managed",
    "known_of",
    "pod_set_starts",
    "queue_pod_labels",
    "start_pod_labels",
]

SYSTEM_NAMESPACE = "kube-system"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
_EMPTY: Mapping[str, str] = {}
# Kueue's pod labels naming the queues that admitted the pod's Workload (AssignQueueLabelsForPods).
LOCAL_QUEUE_POD_LABEL = "kueue.x-k8s.io/local-queue-name"
CLUSTER_QUEUE_POD_LABEL = "kueue.x-k8s.io/cluster-queue-name"
_RFC1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_LABEL_MAX = 63


def is_managed(
    labels: Mapping[str, str],
    namespace: str,
    *,
    manage_without_queue_name: bool,
    own_namespace: str,
    selector: LabelSelector | None = None,
    namespace_labels: Mapping[str, str] | None = None,
) -> bool:
    """Whether the controller manages a job with these labels in this namespace.

    As Kueue v0.18.1 with its default managedJobsNamespaceSelector (the namespace's name not
    kube-system nor the controller's own), which it applies to every job (the feature
    ManagedJobsNamespaceSelectorAlwaysRespected, on by default): a job there is left alone, with
    or without a queue name. Elsewhere a job is managed when it names a queue, or always with
    manageJobsWithoutQueueName.

    A `selector` (the Configuration's managedJobsNamespaceSelector) replaces that default, matched
    against the namespace's labels (`namespace_labels`; its name label when the Namespace is not
    known yet), as Kueue does.
    """
    if selector is not None:
        known = namespace_labels if namespace_labels is not None else {NAMESPACE_NAME_LABEL: namespace}
        if not label_selector_matches(selector, known):
            return False
    elif namespace in (SYSTEM_NAMESPACE, own_namespace):
        return False
    return QUEUE_NAME_LABEL in labels or manage_without_queue_name


class Known(NamedTuple):
    """What the runtime knows besides the objects: the ledger's view and writes in flight.

    (A named tuple: built for every decision, and much cheaper to build than a frozen dataclass.)
    """

    admitted: bool = False  # the ledger holds the Workload's admission
    creating: bool = False
    admitting: bool = False
    finishing: bool = False
    deleting: bool = False
    updating: bool = False
    starting: bool = False  # the job's start is in flight
    adopting: bool = False  # the job's adoption of its prebuilt Workload is in flight
    stopping: bool = False  # the runtime stopped the job because its Workload no longer matches


# The facts while no write is in flight for the Workload, by (admitted, starting): built once.
_QUIET = {(a, s): Known(admitted=a, starting=s) for a in (False, True) for s in (False, True)}


def known_of(
    admitted: bool, writes: Collection[str], *, deleted: bool, starting: bool, stopping: bool = False
) -> Known:
    """`Known` from the purposes of the Workload's writes in flight (`writes`), whether it is
    one the runtime asked to delete (`deleted`), whether the job's start is in flight and whether
    the runtime stopped the job for not matching its Workload (`stopping`)."""
    if not writes and not deleted and not stopping:
        return _QUIET[admitted, starting]  # (most decisions)
    return Known(
        admitted=admitted,
        creating="create-workload" in writes,
        admitting="admit" in writes,
        finishing="finish" in writes,
        deleting=deleted or "delete-workload" in writes,
        updating="workload-update" in writes,
        starting=starting,
        adopting="workload-owners" in writes,
        stopping=stopping,
    )


@dataclass(frozen=True, slots=True)
class Nothing:
    pass


# The one Nothing step (it has no fields): decisions return it rather than building one each time.
NOTHING = Nothing()


@dataclass(frozen=True, slots=True)
class CreateWorkload:
    """Create the job's Workload; suspend the job first when it runs (`suspend`)."""

    suspend: Patch | None
    create: bool


@dataclass(frozen=True, slots=True)
class AwaitPrebuilt:
    """The prebuilt Workload the job names is missing: the job is stopped and waits for it
    (Kueue's handleJobWithNoWorkload for a prebuilt name)."""

    suspend: Patch


@dataclass(frozen=True, slots=True)
class Adopt:
    """The job becomes its prebuilt Workload's controller owner (a metadata merge patch)."""

    patch: bytes


@dataclass(frozen=True, slots=True)
class Start:
    patch: Patch


@dataclass(frozen=True, slots=True)
class Suspend:
    patch: Patch


@dataclass(frozen=True, slots=True)
class Restore:
    patch: Patch


@dataclass(frozen=True, slots=True)
class Release:
    """Remove the controller's finalizer from the job (its Workload has finished, or it ended)."""

    patch: Patch


@dataclass(frozen=True, slots=True)
class Finish:
    outcome: Outcome


@dataclass(frozen=True, slots=True)
class DeleteMismatched:
    """The Workload no longer matches the job: first the job is stopped (`stop`), then (once its
    pod templates are restored from the Workload) the Workload is deleted (`delete`)."""

    stop: Patch | None
    delete: bool


@dataclass(frozen=True, slots=True)
class UpdateMismatched:
    """A suspended job's Workload holds no quota and no longer matches: it takes these pod sets."""

    pod_sets: list[PodSet]


Step = (
    Nothing
    | CreateWorkload
    | AwaitPrebuilt
    | Adopt
    | Start
    | Suspend
    | Restore
    | Release
    | Finish
    | DeleteMismatched
    | UpdateMismatched
)


def queue_pod_labels(workload: Workload) -> dict[str, str]:
    """Kueue v0.18.1's AssignQueueLabelsForPods (beta, on by default): the pods of an admitted
    Workload carry its LocalQueue's name and, when it is a valid label value (an RFC 1123
    label), its ClusterQueue's."""
    labels = {LOCAL_QUEUE_POD_LABEL: workload.spec.queue_name}
    admission = workload.status.admission
    cluster_queue = admission.cluster_queue if admission is not None else ""
    if len(cluster_queue) <= _LABEL_MAX and _RFC1123_LABEL.fullmatch(cluster_queue):
        labels[CLUSTER_QUEUE_POD_LABEL] = cluster_queue
    return labels


def start_pod_labels(workload: Workload) -> dict[str, str]:
    """What starting adds to every pod set's labels besides its pod set label: the queue labels,
    and a manager's worker pod label."""
    return {**worker_pod_labels(workload), **queue_pod_labels(workload)}


def pod_set_starts(
    admission: Admission,
    flavors: Mapping[str, ResourceFlavor],
    pod_sets: list[PodSet],
    labels_for_all: Mapping[str, str] = _EMPTY,
    workload_name: str = "",
) -> list[PodSetStart]:
    """Each pod set's node labels and tolerations from its assigned flavors, and its pod set
    label (with `labels_for_all`: the labels every pod set gets besides, e.g. a MultiKueue
    worker's pod label). A pod set admitted with a topology assignment also gets Kueue's
    scheduling gate and annotations (`workload_name`: its Workload's), so its pods wait for the
    ungater to give each its domain's node selector."""
    labels = admission_node_labels(admission, flavors)
    tolerations = admission_tolerations(admission, flavors)
    counts = {a.name: a.count for a in admission.pod_set_assignments}
    placed = {a.name for a in admission.pod_set_assignments if a.topology_assignment is not None}
    return [
        PodSetStart(
            name=ps.name,
            node_selector=labels.get(ps.name, {}),
            tolerations=tolerations.get(ps.name, []),
            labels={PODSET_LABEL: ps.name, **labels_for_all},
            annotations=_topology_annotations(ps, workload_name) if ps.name in placed else _EMPTY,
            count=counts.get(ps.name),
            scheduling_gates=(TOPOLOGY_GATE,) if ps.name in placed else (),
        )
        for ps in pod_sets
    ]


def _topology_annotations(pod_set: PodSet, workload_name: str) -> dict[str, str]:
    """What Kueue's start puts on the pods of a pod set placed in topology domains: the
    Workload's name (the ungater finds its pods by it) and, for a pod set that asked for no
    topology (a TAS-only ClusterQueue placed it), the unconstrained request."""
    out = {WORKLOAD_ANNOTATION: workload_name}
    asked = pod_template_view(pod_set.template).metadata.annotations
    request = pod_set.topology_request
    explicit = request is not None and (request.required or request.preferred or request.unconstrained)
    if not explicit and not any(k in asked for k in (REQUIRED, PREFERRED, UNCONSTRAINED)):
        out[UNCONSTRAINED] = "true"
    return out


def expected_pod_sets(workload: Workload) -> list[PodSet]:
    """The pod sets a job of this Workload runs: as recorded, but for a pod set admitted with
    fewer pods (partial admission, a `minCount`), which runs the admitted count (Kueue's
    expectedRunningPodSets)."""
    recorded = workload.spec.pod_sets
    admission = workload.status.admission
    if admission is None or all(ps.min_count is None for ps in recorded):
        return recorded
    counts = {a.name: a.count for a in admission.pod_set_assignments}
    return [
        ps if ps.min_count is None or counts.get(ps.name) is None else replace(ps, count=counts[ps.name])
        for ps in recorded
    ]


def _mismatch(
    integration: Integration,
    obj: Any,
    workload: Workload,
    known: Known,
    memo: MatchMemo | None,
    reserved: bool,
    lenient: bool,
    prebuilt: bool,
) -> Step | None:
    """Kueue's ensureOneWorkload: a Workload that no longer matches its job is replaced
    (`lenient`: tolerations left out of the comparison; `reserved`: the quota is held); a
    `prebuilt` one is finished instead (OutOfSync)."""
    pod_sets = integration.pod_sets(obj)
    if integration.jobs_from_pods:
        same = group_equivalent(pod_sets, workload.spec.pod_sets)  # a pod group's prebuilt Workload
    else:
        recorded = expected_pod_sets(workload) if reserved else workload.spec.pod_sets
        same = equivalent(pod_sets, recorded, admitted=lenient)
    if same:
        if memo is not None:
            memo.record(obj.metadata, workload.metadata, admitted=lenient)
        return None
    if prebuilt:
        return NOTHING if known.finishing else Finish(Outcome(False, OUT_OF_SYNC_MESSAGE, OUT_OF_SYNC_REASON))
    suspended = integration.is_suspended(obj)
    if known.deleting or known.updating or workload.metadata.deletion_timestamp:
        # On its way out or being rewritten: a running job waits suspended.
        return NOTHING if suspended else Suspend(Patch(integration.suspend_patch(obj)))
    if not suspended:
        return DeleteMismatched(Patch(integration.suspend_patch(obj)), delete=False)
    if integration.restore_pending(obj) and (not reserved or known.stopping or _evicted(workload)):
        # The templates come back as the Workload recorded them before it goes (Kueue's stopJob,
        # when the runtime stopped it). A job suspended by someone else while its Workload holds
        # quota keeps its templates: Kueue only deletes that Workload.
        patch = integration.restore_patch(obj, workload.spec.pod_sets)
        return NOTHING if patch is None else Restore(patch)
    if not reserved:
        return UpdateMismatched(pod_sets)
    return DeleteMismatched(None, delete=True)


def _evicted(workload: Workload) -> bool:
    for c in workload.status.conditions:
        if c.type == "Evicted":
            return c.status == "True"
    return False


def decide(
    integration: Integration,
    obj: Any,
    workload: Workload | None,
    known: Known,
    flavors: Mapping[str, ResourceFlavor],
    memo: MatchMemo | None = None,
) -> Step:
    """The next step for `obj` (a managed job of `integration`) and its Workload.

    `memo` (kept by the caller across calls) lets the comparison of the job with its Workload
    be skipped while neither changed since they last matched; the step is the same without it.
    (Each fact is asked of the integration only where a step depends on it.)
    """
    skip = getattr(integration, "skip", None)
    if skip is not None and skip(obj):
        return NOTHING  # a job its kind leaves alone (Kueue's JobWithSkip)
    outcome = integration.finished(obj)
    prebuilt = prebuilt_name(obj.metadata) != ""
    if prebuilt and workload is not None and controlled_elsewhere(workload, obj.metadata):
        workload = None  # (Kueue: the job has no Workload then)
    if workload is None:
        if outcome is not None:
            release = integration.release_patch(obj)
            return NOTHING if release is None else Release(release)
        # A job stopped by deletion gets its Workload first, and is stopped only if that is
        # not admitted (Kueue's handleJobWithNoWorkload).
        suspended = integration.is_suspended(obj)
        suspend = None if suspended or integration.stop_deletes else Patch(integration.suspend_patch(obj))
        if prebuilt:  # never created here: the job waits for the Workload it names
            return NOTHING if suspend is None else AwaitPrebuilt(suspend)
        return CreateWorkload(suspend, not known.creating)
    if prebuilt:
        adopt = adoption_patch(workload, obj.metadata, integration.api_version, integration.kind)
        if adopt is not None:
            return NOTHING if known.adopting else Adopt(adopt)
    finished = False
    for c in workload.status.conditions:  # its Finished condition (a loop: no call, no generator)
        if c.type == "Finished" and c.status == "True":
            finished = True
            break
    if finished:
        release = integration.release_patch(obj)
        if release is not None:
            return Release(release)  # Kueue's finalizeJob once the Workload is finished
    if outcome is None and workload.metadata.deletion_timestamp and integration.stop_deletes:
        # Kueue stops the job of a Workload being deleted; a pod, even a gated one, is deleted.
        return Suspend(Patch(integration.suspend_patch(obj)))
    if outcome is not None:
        return Finish(outcome) if not finished and not known.finishing else NOTHING
    if not finished:
        reserved = known.admitted or known.admitting or workload.status.admission is not None
        # A started job's tolerations include its flavors' until restored (Kueue ignores them while
        # the quota is reserved, which it keeps until the job is stopped; an eviction lets go first).
        lenient = reserved or integration.restore_pending(obj)
        # The memo: neither spec changed since they last matched (the comparison is skipped).
        if memo is None or not memo.matched(obj.metadata, workload.metadata, admitted=lenient):
            replace = _mismatch(integration, obj, workload, known, memo, reserved, lenient, prebuilt)
            if replace is not None:
                return replace
    if known.admitting:
        return NOTHING
    suspended = integration.is_suspended(obj)
    if known.admitted:
        admission = workload.status.admission
        if not suspended or admission is None or known.starting:
            # Running; or our write succeeded but its event has not been applied yet, or the
            # start is on its way.
            return NOTHING
        labels_for_all, name = start_pod_labels(workload), workload.metadata.name
        starts = pod_set_starts(admission, flavors, workload.spec.pod_sets, labels_for_all, name)
        return Start(Patch(integration.start_patch(obj, starts)))
    if not suspended:
        return Suspend(Patch(integration.suspend_patch(obj)))
    if workload.spec.pod_sets and integration.restore_pending(obj):
        patch = integration.restore_patch(obj, workload.spec.pod_sets)
        if patch is not None:
            return Restore(patch)
    return NOTHING
