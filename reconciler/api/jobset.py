"""JobSet (jobset.x-k8s.io/v1alpha2): the fields the JobSet integration reads.

A JobSet's replicated jobs are kept raw (`JobSetSpec.replicated_jobs`): starting and restoring
a JobSet rewrite their pod templates, and a merge patch replaces the whole list, so every
field the JobSet's own controller reads (groups, dependsOn, successPolicy targets...) must go
back as it came. `replicated_job` decodes the part the controller reads from one of them.
"""

from __future__ import annotations

import msgspec

from .meta import ApiStruct, Condition, ObjectMeta

__all__ = [
    "JobSet",
    "JobSetSpec",
    "JobSetStatus",
    "ReplicatedJob",
    "ReplicatedJobStatus",
    "replicated_job",
]


class _JobTemplateSpec(ApiStruct):
    template: msgspec.Raw = msgspec.Raw(b"{}")
    parallelism: int | None = None
    completions: int | None = None


class _JobTemplate(ApiStruct):
    spec: _JobTemplateSpec = msgspec.field(default_factory=_JobTemplateSpec)


class ReplicatedJob(ApiStruct):
    """One replicated job: `replicas` Jobs made from one Job template."""

    name: str
    template: _JobTemplate = msgspec.field(default_factory=_JobTemplate)
    replicas: int = 1

    @property
    def pod_template(self) -> msgspec.Raw:
        return self.template.spec.template

    @property
    def parallelism(self) -> int | None:
        return self.template.spec.parallelism

    @property
    def completions(self) -> int | None:
        return self.template.spec.completions


def replicated_job(raw: msgspec.Raw) -> ReplicatedJob:
    return msgspec.json.decode(raw, type=ReplicatedJob)


class JobSetSpec(ApiStruct):
    replicated_jobs: list[msgspec.Raw] = []
    suspend: bool | None = None


class ReplicatedJobStatus(ApiStruct):
    """Jobs (not pods) of one replicated job, by state."""

    name: str = ""
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0


class JobSetStatus(ApiStruct):
    conditions: list[Condition] = []
    replicated_jobs_status: list[ReplicatedJobStatus] = []


class JobSet(ApiStruct, kw_only=True):
    api_version: str = "jobset.x-k8s.io/v1alpha2"
    kind: str = "JobSet"
    metadata: ObjectMeta
    spec: JobSetSpec = msgspec.field(default_factory=JobSetSpec)
    status: JobSetStatus = msgspec.field(default_factory=JobSetStatus)
