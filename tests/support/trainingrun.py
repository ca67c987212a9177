"""A test integration: "TrainingRun", a CRD-like kind with a pod set per role.

It shows what a new kind is: this one module (a projection, the protocol's methods and one
`Registration`: its webhooks and the API access it needs) and one registration call
(`registered(TRAINING_RUN_REGISTRATION)`, or a registry passed to the Reconciler:
`REGISTRY_WITH_TRAINING_RUN`). Nothing else in the controller knows it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import msgspec

from reconciler.admission.suspendable import SuspendableKind
from reconciler.api import Condition, ObjectMeta, PodSet
from reconciler.api.meta import ApiStruct
from reconciler.api.resources import Resource
from reconciler.integrations import (
    PODSET_LABEL,
    REGISTRY,
    Access,
    Integration,
    Outcome,
    Patch,
    PodSetStart,
    Registration,
    SuspendableJob,
)

__all__ = [
    "REGISTRY_WITH_TRAINING_RUN",
    "TRAINING_RUN",
    "TRAINING_RUN_REGISTRATION",
    "TrainingRun",
    "training_run",
]

TRAINING_RUNS = Resource("example.com", "v1", "trainingruns", "TrainingRun", namespaced=True)


class Role(ApiStruct):
    name: str
    template: msgspec.Raw
    replicas: int = 1


class TrainingRunSpec(ApiStruct):
    roles: list[Role] = msgspec.field(default_factory=list)
    suspend: bool = False


class TrainingRunStatus(ApiStruct):
    conditions: list[Condition] = msgspec.field(default_factory=list)
    active: int = 0
    ready: int = 0


class TrainingRun(ApiStruct, kw_only=True):
    api_version: str = "example.com/v1"
    kind: str = "TrainingRun"
    metadata: ObjectMeta
    spec: TrainingRunSpec = msgspec.field(default_factory=TrainingRunSpec)
    status: TrainingRunStatus = msgspec.field(default_factory=TrainingRunStatus)


def _inject(template: msgspec.Raw, start: PodSetStart) -> dict[str, Any]:
    decoded: dict[str, Any] = msgspec.json.decode(template)
    spec = decoded.setdefault("spec", {})
    spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **start.node_selector}
    current: list[Any] = spec.get("tolerations", [])
    added = [t for t in msgspec.to_builtins(list(start.tolerations)) if t not in current]
    if added:
        spec["tolerations"] = [*current, *added]
    meta = decoded.setdefault("metadata", {})
    meta["labels"] = {**meta.get("labels", {}), **start.labels}
    if start.annotations:
        meta["annotations"] = {**meta.get("annotations", {}), **start.annotations}
    return decoded


class TrainingRunIntegration(SuspendableJob):
    framework = "example.com/trainingrun"
    kind = "TrainingRun"
    api_version = "example.com/v1"
    resource = TRAINING_RUNS
    projection: type[Any] = TrainingRun

    def pod_sets(self, obj: TrainingRun) -> list[PodSet]:
        return [PodSet(name=r.name, template=r.template, count=r.replicas) for r in obj.spec.roles]

    def is_suspended(self, obj: TrainingRun) -> bool:
        return obj.spec.suspend

    def start_patch(self, obj: TrainingRun, starts: Sequence[PodSetStart]) -> bytes:
        by_name = {s.name: s for s in starts}
        roles = [
            {"name": r.name, "replicas": r.replicas, "template": _inject(r.template, by_name[r.name])}
            for r in obj.spec.roles
        ]
        return msgspec.json.encode({"spec": {"suspend": False, "roles": roles}})

    def suspend_patch(self, obj: TrainingRun) -> bytes:
        return b'{"spec":{"suspend":true}}'

    def restore_pending(self, obj: TrainingRun) -> bool:
        return any(PODSET_LABEL.encode() in bytes(r.template) for r in obj.spec.roles)

    def restore_patch(self, obj: TrainingRun, recorded: Sequence[PodSet]) -> Patch | None:
        templates = {ps.name: ps.template for ps in recorded}
        roles = [
            {"name": r.name, "replicas": r.replicas, "template": templates[r.name]} for r in obj.spec.roles
        ]
        return Patch(msgspec.json.encode({"spec": {"roles": roles}}))

    def is_active(self, obj: TrainingRun) -> bool:
        return obj.status.active > 0

    def pods_ready(self, obj: TrainingRun) -> bool:
        return obj.status.ready >= sum(r.replicas for r in obj.spec.roles)

    def pods_ready_count(self, obj: TrainingRun) -> int:
        return obj.status.ready

    def finished(self, obj: TrainingRun) -> Outcome | None:
        for c in obj.status.conditions:
            if c.type in ("Succeeded", "Failed") and c.status == "True":
                return Outcome(c.type == "Succeeded", c.message)
        return None

    def reclaimable_pods(self, obj: TrainingRun) -> Mapping[str, int]:
        return {}

    def owns(self, obj: TrainingRun, owner_kind: str, owner_api_version: str, owner_name: str) -> bool:
        return (owner_kind, owner_api_version, owner_name) == (self.kind, self.api_version, obj.metadata.name)


TRAINING_RUN: Integration = TrainingRunIntegration()
_DOOR = SuspendableKind(
    TRAINING_RUN.framework,
    TrainingRun,
    TRAINING_RUNS.group,
    TRAINING_RUNS.version,
    TRAINING_RUNS.plural,
    "trainingrun",
)
TRAINING_RUN_REGISTRATION = Registration(
    TRAINING_RUN,
    webhooks=_DOOR.routes(mutate_why="Suspends a TrainingRun that names a queue."),
    access=(
        Access(
            TRAINING_RUNS.group, (TRAINING_RUNS.plural,), ("get", "list", "watch", "patch"), "TrainingRuns."
        ),
    ),
)
REGISTRY_WITH_TRAINING_RUN: Mapping[str, Integration] = MappingProxyType(
    {**REGISTRY, TRAINING_RUN.framework: TRAINING_RUN}
)


def training_run(
    name: str, roles: Sequence[tuple[str, int, Mapping[str, str]]], *, suspend: bool
) -> TrainingRun:
    """A TrainingRun with one role per (name, replicas, container requests)."""
    body = {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {
            "suspend": suspend,
            "roles": [
                {
                    "name": role,
                    "replicas": replicas,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "image": "busybox", "resources": {"requests": dict(requests)}}
                            ]
                        }
                    },
                }
                for role, replicas, requests in roles
            ],
        },
    }
    run: TrainingRun = msgspec.json.decode(msgspec.json.encode(body), type=TrainingRun)
    return run
