"""LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): the fields the LeaderWorkerSet integration reads.

The leader's and the workers' pod templates are kept raw: each becomes a pod set's template in
the group's Workload as it came.
"""

from __future__ import annotations

import msgspec

from .meta import ApiStruct, ObjectMeta

__all__ = [
    "LeaderWorkerSet",
    "LeaderWorkerSetSpec",
    "LeaderWorkerSetStatus",
    "LeaderWorkerTemplate",
    "RollingUpdateConfiguration",
    "RolloutStrategy",
]


class LeaderWorkerTemplate(ApiStruct):
    size: int | None = None
    # Raw (msgspec decodes no optional Raw): empty when the set has no leader template.
    leader_template_raw: msgspec.Raw = msgspec.field(default=msgspec.Raw(b""), name="leaderTemplate")
    worker_template: msgspec.Raw = msgspec.Raw(b"{}")

    @property
    def leader_template(self) -> msgspec.Raw | None:
        raw = bytes(self.leader_template_raw)
        return None if raw in (b"", b"null") else self.leader_template_raw


class RollingUpdateConfiguration(ApiStruct):
    # An IntOrString: a number of groups or a percentage.
    max_surge: int | str | None = None


class RolloutStrategy(ApiStruct):
    rolling_update_configuration: RollingUpdateConfiguration | None = None


class LeaderWorkerSetSpec(ApiStruct):
    replicas: int | None = None
    leader_worker_template: LeaderWorkerTemplate = msgspec.field(default_factory=LeaderWorkerTemplate)
    rollout_strategy: RolloutStrategy = msgspec.field(default_factory=RolloutStrategy)


class LeaderWorkerSetStatus(ApiStruct):
    replicas: int = 0
    ready_replicas: int = 0
    updated_replicas: int = 0


class LeaderWorkerSet(ApiStruct, kw_only=True):
    api_version: str = "leaderworkerset.x-k8s.io/v1"
    kind: str = "LeaderWorkerSet"
    metadata: ObjectMeta
    spec: LeaderWorkerSetSpec = msgspec.field(default_factory=LeaderWorkerSetSpec)
    status: LeaderWorkerSetStatus = msgspec.field(default_factory=LeaderWorkerSetStatus)

    @property
    def replicas(self) -> int:
        """Groups wanted (1 when unset, as the LWS API defaults it)."""
        return 1 if self.spec.replicas is None else self.spec.replicas

    @property
    def size(self) -> int:
        """Pods per group, the leader included (1 when unset)."""
        size = self.spec.leader_worker_template.size
        return 1 if size is None else size
