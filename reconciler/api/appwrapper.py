"""AppWrapper (workload.codeflare.dev/v1beta2, project-codeflare/appwrapper v1.2.2): the fields
the AppWrapper integration reads.

An AppWrapper wraps Kubernetes objects (its components); each component's template is kept raw,
as it came, and so is each component (`components`): starting and restoring write the
components list back whole with only ``podSetInfos`` changed, so every field the AppWrapper
controller reads goes back as it came. `component` decodes the part of one the integration reads.
"""

from __future__ import annotations

import msgspec

from .meta import ApiStruct, Condition, ObjectMeta
from .resources import Resource

__all__ = [
    "APPWRAPPERS",
    "AppWrapper",
    "AppWrapperComponent",
    "AppWrapperComponentStatus",
    "AppWrapperPodSet",
    "AppWrapperSpec",
    "AppWrapperStatus",
    "component",
]

APPWRAPPERS = Resource("workload.codeflare.dev", "v1beta2", "appwrappers", "AppWrapper", namespaced=True)


class AppWrapperPodSet(ApiStruct):
    """A homogeneous set of pods in a component: `replicas` pods (1 when unset) from the pod
    template at `path` (``template`` then ``.field`` and ``[index]`` steps)."""

    path: str = ""
    replicas: int | None = None
    annotations: dict[str, str] = {}


class AppWrapperComponent(ApiStruct):
    template: msgspec.Raw = msgspec.Raw(b"{}")
    declared_pod_sets: list[AppWrapperPodSet] = msgspec.field(default_factory=list, name="podSets")
    pod_set_infos: list[msgspec.Raw] = msgspec.field(default_factory=list, name="podSetInfos")


def component(raw: msgspec.Raw) -> AppWrapperComponent:
    return msgspec.json.decode(raw, type=AppWrapperComponent)


class AppWrapperSpec(ApiStruct):
    components: list[msgspec.Raw] = []
    suspend: bool = False
    managed_by: str | None = None


class AppWrapperComponentStatus(ApiStruct):
    name: str = ""
    kind: str = ""
    api_version: str = ""
    pod_sets: list[AppWrapperPodSet] = []


class AppWrapperStatus(ApiStruct):
    phase: str = ""
    conditions: list[Condition] = []
    component_status: list[AppWrapperComponentStatus] = []

    def condition_true(self, kind: str) -> bool:
        return any(c.type == kind and c.status == "True" for c in self.conditions)


class AppWrapper(ApiStruct, kw_only=True):
    api_version: str = "workload.codeflare.dev/v1beta2"
    kind: str = "AppWrapper"
    metadata: ObjectMeta
    spec: AppWrapperSpec = msgspec.field(default_factory=AppWrapperSpec)
    status: AppWrapperStatus = msgspec.field(default_factory=AppWrapperStatus)
