"""Object metadata, conditions, label selectors, taints and tolerations.

Every struct here and in the sibling modules keeps only the fields the
controller uses and is decoded straight from API JSON with msgspec, which is
faster and far smaller in memory than a generic client model.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec


class ApiStruct(msgspec.Struct, rename="camel", omit_defaults=True):
    """Base: camelCase on the wire, unknown fields ignored, defaults omitted."""


class OwnerReference(ApiStruct):
    api_version: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None
    block_owner_deletion: bool | None = None


class ObjectMeta(ApiStruct):
    name: str = ""
    namespace: str = ""
    uid: str = ""
    resource_version: str = ""
    generation: int = 0
    creation_timestamp: str | None = None
    deletion_timestamp: str | None = None
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    owner_references: list[OwnerReference] = []
    finalizers: list[str] = []


class Condition(msgspec.Struct, rename="camel"):
    """Reason and message are always written: the API requires them on Workloads."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class LabelSelectorRequirement(ApiStruct):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(ApiStruct):
    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class Taint(ApiStruct):
    key: str
    effect: str
    value: str = ""


class Toleration(ApiStruct):
    key: str = ""
    operator: str = ""
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None


class Namespace(ApiStruct, kw_only=True):
    api_version: str = "v1"
    kind: str = "Namespace"
    metadata: ObjectMeta


T = TypeVar("T")


def decode(data: bytes, kind: type[T]) -> T:
    """Decode API JSON into a projection; raises msgspec.ValidationError naming the field."""
    return msgspec.json.decode(data, type=kind)
