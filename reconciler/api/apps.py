"""Deployments and StatefulSets (apps/v1): the fields their webhooks read.

The pod template is kept raw: the webhooks only add labels and annotations to it.
"""

from __future__ import annotations

import msgspec

from .meta import ApiStruct, ObjectMeta

__all__ = ["AppsSpec", "AppsStatus", "Deployment", "StatefulSet"]


class AppsSpec(ApiStruct):
    replicas: int | None = None
    template: msgspec.Raw = msgspec.Raw(b"{}")


class AppsStatus(ApiStruct):
    replicas: int = 0
    ready_replicas: int = 0


class Deployment(ApiStruct, kw_only=True):
    api_version: str = "apps/v1"
    kind: str = "Deployment"
    metadata: ObjectMeta
    spec: AppsSpec = msgspec.field(default_factory=AppsSpec)
    status: AppsStatus = msgspec.field(default_factory=AppsStatus)


class StatefulSet(ApiStruct, kw_only=True):
    api_version: str = "apps/v1"
    kind: str = "StatefulSet"
    metadata: ObjectMeta
    spec: AppsSpec = msgspec.field(default_factory=AppsSpec)
    status: AppsStatus = msgspec.field(default_factory=AppsStatus)

    @property
    def replicas(self) -> int:
        """Pods wanted (1 when unset, as the API defaults it)."""
        return 1 if self.spec.replicas is None else self.spec.replicas
