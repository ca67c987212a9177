"""Plain pods (core/v1 Pod) behind the integration protocol, as Kueue v0.18.1's `pod` framework
treats a single pod.

The pod webhook marks a pod the controller manages (`kueue.x-k8s.io/managed: "true"`), holds it
with the scheduling gate `kueue.x-k8s.io/admission` and Kueue's finalizer. Its Workload has one
pod set, `main`, of one pod, whose template is the pod's spec as it is (gate included). A pod
counts as suspended while gated or once terminated. Starting removes the gate and injects the
flavor's node labels and tolerations and the pod set label in one write (the API lets a gated
pod's node selector grow). A pod cannot be suspended again: stopping it deletes it, and its
Workload is then finished. It finishes with its phase (Succeeded or Failed, with the pod's
message); PodsReady is its Ready condition. The finalizer goes once its Workload has finished
or the pod is being deleted.

A pod of a group (`kueue.x-k8s.io/pod-group-name`, `is_group_pod`) is not a job of its own: its
group is (`podgroup`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from reconciler.api import PodSet
from reconciler.api.meta import ObjectMeta
from reconciler.api.pods import ManagedPod
from reconciler.api.resources import PODS, Resource
from reconciler.core.model.jobs import PODSET_LABEL, TERMINATED_PHASES
from reconciler.core.model.workloads import JOB_POD_SET
from reconciler.core.topology.ungate import TOPOLOGY_GATE

from ..base import Outcome, Patch, PodSetStart
from ..children import SUSPENDING_PARENT_ANNOTATION

__all__ = [
    "ADMISSION_GATE",
    "FAST_ADMISSION_ANNOTATION",
    "GROUP_NAME_LABEL",
    "GROUP_TOTAL_COUNT_ANNOTATION",
    "MANAGED_LABEL",
    "MANAGED_VALUE",
    "POD",
    "POD_FINALIZER",
    "POD_INDEX_LABEL_ANNOTATION",
    "ROLE_HASH_ANNOTATION",
    "SERVING_ANNOTATION",
    "TOPOLOGY_GATE",
    "PlainPod",
    "group_name",
    "is_group_pod",
    "marked_by_parent",
    "pod_is_job",
    "pod_start_patch",
    "role_hash",
    "spec_shape",
]

MANAGED_LABEL = "kueue.x-k8s.io/managed"
MANAGED_VALUE = "true"
POD_FINALIZER = "kueue.x-k8s.io/managed"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
# Kueue's topology gate goes too when a pod starts without topology-aware scheduling.
GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
# Written on a StatefulSet's pods (one serving group); not acted on for a plain pod group.
FAST_ADMISSION_ANNOTATION = "kueue.x-k8s.io/pod-group-fast-admission"
SERVING_ANNOTATION = "kueue.x-k8s.io/pod-group-serving"
POD_INDEX_LABEL_ANNOTATION = "kueue.x-k8s.io/pod-group-pod-index-label"
# The parts of a pod's spec that make its role (Kueue's SpecShape), in the order Go's encoder
# writes a map's keys (sorted).
_SHAPE_FIELDS = (
    "affinity",
    "containers",
    "initContainers",
    "nodeSelector",
    "overhead",
    "priority",
    "resourceClaims",
    "runtimeClassName",
    "tolerations",
    "topologySpreadConstraints",
)
# Go's encoder escapes these inside strings (the only place JSON can hold them).
_GO_ESCAPES = ((b"<", b"\\u003c"), (b">", b"\\u003e"), (b"&", b"\\u0026"))


def _containers_shape(containers: Any) -> Any:
    if not containers:
        return None
    return [
        {"ports": c.get("ports"), "resources": {"requests": (c.get("resources") or {}).get("requests")}}
        for c in containers
    ]


def spec_shape(spec: Any) -> dict[str, Any]:
    """The parts of a decoded pod spec Kueue's SpecShape keeps (what a pod's role hash reads and
    what may not change in a managed pod template): each container's requests and ports, and the
    spec's node selector, affinity, tolerations and the rest of `_SHAPE_FIELDS`."""
    decoded = spec if isinstance(spec, dict) else {}
    shape: dict[str, Any] = {}
    for name in _SHAPE_FIELDS:
        if name in ("containers", "initContainers"):
            shape[name] = _containers_shape(decoded.get(name))
        else:
            shape[name] = decoded.get(name)
    return shape


def role_hash(spec: msgspec.Raw | bytes) -> str:
    """Kueue's role hash of a pod: the first 8 hex digits of the SHA-256 of its spec's shape
    (containers' requests and ports, node selector, affinity, tolerations, runtime class,
    priority, topology spread, overhead, resource claims) as Go's encoder writes it. The API
    server writes a pod as Go does, so each part is taken as it came, in its own key order."""
    encoded = msgspec.json.encode({"spec": spec_shape(msgspec.json.decode(spec))})
    for char, escaped in _GO_ESCAPES:
        encoded = encoded.replace(char, escaped)
    return hashlib.sha256(encoded).hexdigest()[:8]


def group_name(labels: Mapping[str, str], annotations: Mapping[str, str]) -> str:
    """A pod's group ("" for a single pod): as Kueue v0.18.1 reads it (its feature
    WorkloadIdentifierAnnotations, on by default), the annotation first, then the label."""
    return annotations.get(GROUP_NAME_LABEL) or labels.get(GROUP_NAME_LABEL, "")


def is_group_pod(labels: Mapping[str, str], annotations: Mapping[str, str]) -> bool:
    """Whether a pod belongs to a Kueue pod group (then `podgroup` handles it, not `PlainPod`)."""
    return bool(group_name(labels, annotations))


def marked_by_parent(annotations: Mapping[str, str]) -> bool:
    """Whether a framework that made the pod (a Deployment's, a StatefulSet's) marked it as
    suspended by its parent: with the pod integration only implied by such frameworks, Kueue
    manages those pods and no others."""
    return bool(annotations.get(SUSPENDING_PARENT_ANNOTATION))


def pod_is_job(meta: ObjectMeta, *, implied: bool) -> bool:
    """Whether a pod is a job of the pod integration: labelled managed, and, with the
    integration only `implied` by a parent's framework, marked by its parent (Kueue's Skip)."""
    return meta.labels.get(MANAGED_LABEL) == MANAGED_VALUE and (
        not implied or marked_by_parent(meta.annotations)
    )


def _gated(obj: ManagedPod) -> bool:
    return any(g.name == ADMISSION_GATE for g in obj.spec_view().scheduling_gates)


def pod_start_patch(obj: ManagedPod, start: PodSetStart) -> bytes:
    """The merge patch that starts one pod: the admission gate (and the topology gate) gone, its
    pod set's node labels, tolerations, labels and annotations in, in one write."""
    spec = obj.spec_view()
    gates = [g.name for g in spec.scheduling_gates if g.name not in (ADMISSION_GATE, TOPOLOGY_GATE)]
    body: dict[str, Any] = {"spec": {"schedulingGates": [{"name": g} for g in gates]}}
    if start.node_selector:
        body["spec"]["nodeSelector"] = dict(start.node_selector)
    current = msgspec.to_builtins(spec.tolerations)
    added = [t for t in msgspec.to_builtins(list(start.tolerations)) if t not in current]
    if added:
        body["spec"]["tolerations"] = [*current, *added]
    meta: dict[str, Any] = {}
    if start.labels:
        meta["labels"] = dict(start.labels)
    if start.annotations:
        meta["annotations"] = dict(start.annotations)
    if meta:
        body["metadata"] = meta
    # The resourceVersion makes the write fail rather than ungate a pod changed meanwhile.
    body.setdefault("metadata", {})["resourceVersion"] = obj.metadata.resource_version
    return msgspec.json.encode(body)


class PlainPod:
    """Kueue's `pod` framework, single pods."""

    framework: str = "pod"
    kind: str = "Pod"
    api_version: str = "v1"
    resource: Resource = PODS
    projection: type[Any] = ManagedPod
    stop_deletes: bool = True
    top_level: bool = True
    jobs_from_pods: bool = False
    topology_placement: None = None

    def pod_sets(self, obj: ManagedPod) -> list[PodSet]:
        template = b'{"spec":' + bytes(obj.spec) + b"}"
        return [PodSet(name=JOB_POD_SET, template=msgspec.Raw(template), count=1)]

    def is_suspended(self, obj: ManagedPod) -> bool:
        return obj.status.phase in TERMINATED_PHASES or _gated(obj)

    def start_patch(self, obj: ManagedPod, starts: Sequence[PodSetStart]) -> bytes:
        start = next((s for s in starts if s.name == JOB_POD_SET), None) or PodSetStart(JOB_POD_SET)
        return pod_start_patch(obj, start)

    def suspend_patch(self, obj: ManagedPod) -> bytes:
        # Never sent: a pod is stopped by deleting it (`stop_deletes`).
        return b"{}"

    def release_patch(self, obj: ManagedPod) -> Patch | None:
        finalizers = obj.metadata.finalizers
        if POD_FINALIZER not in finalizers:
            return None
        rest = [f for f in finalizers if f != POD_FINALIZER]
        meta = {"finalizers": rest, "resourceVersion": obj.metadata.resource_version}
        return Patch(msgspec.json.encode({"metadata": meta}))

    def restore_pending(self, obj: ManagedPod) -> bool:
        """Whether starting injected its flavor (then its tolerations are not compared with
        its Workload's, as while the quota is held; a pod is never restored)."""
        return PODSET_LABEL in obj.metadata.labels

    def restore_patch(self, obj: ManagedPod, recorded: Sequence[PodSet]) -> Patch | None:
        return None  # a pod is deleted, never restored

    def is_active(self, obj: ManagedPod) -> bool:
        return False  # as Kueue for a single pod: its quota returns when the eviction is written

    def pods_ready(self, obj: ManagedPod) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in obj.status.conditions)

    def pods_ready_count(self, obj: ManagedPod) -> int:
        return 1 if self.pods_ready(obj) else 0

    def finished(self, obj: ManagedPod) -> Outcome | None:
        if obj.status.phase not in TERMINATED_PHASES:
            return None
        return Outcome(obj.status.phase == "Succeeded", obj.status.message)

    def reclaimable_pods(self, obj: ManagedPod) -> Mapping[str, int]:
        return {}

    def owns(self, obj: ManagedPod, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return False  # a pod is its own job; nothing it controls is counted


POD = PlainPod()
