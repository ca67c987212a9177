"""LeaderWorkerSet groups named apart in snapshots, without touching snapshot.py.

snapshot.py names a Workload by its first owner (`LeaderWorkerSet/NAME`), which every group's
Workload of a set shares (Kueue and the controller both own each by the set, and both annotate
it with its group's index). `GroupNamed` is the view of the API take_snapshot reads through: a
set's Workloads are listed with the owner's name made `NAME/INDEX`, so each group has keys of
its own (`Workload[NS/LeaderWorkerSet/NAME/INDEX]`) and the Workload names in messages become
`<workload of LeaderWorkerSet/NAME/INDEX>`. Nothing else is changed.
"""

from __future__ import annotations

import copy
from typing import Any

from e2e.testbed import KubeClient

Obj = dict[str, Any]
GROUP_INDEX_ANNOTATION = "kueue.x-k8s.io/component-workload-index"
_LWS_KIND = "LeaderWorkerSet"


def group_named(workload: Obj) -> Obj:
    """The Workload with its LeaderWorkerSet owner named `NAME/INDEX`; others unchanged."""
    meta = workload.get("metadata") or {}
    index = (meta.get("annotations") or {}).get(GROUP_INDEX_ANNOTATION)
    refs = meta.get("ownerReferences") or []
    if index is None or not refs or refs[0].get("kind") != _LWS_KIND:
        return workload
    renamed = copy.deepcopy(workload)
    owner = renamed["metadata"]["ownerReferences"][0]
    owner["name"] = f"{owner['name']}/{index}"
    return renamed


class GroupNamed:
    """A KubeClient's `get` for take_snapshot: Workload lists with group_named applied."""

    def __init__(self, kube: KubeClient) -> None:
        self._kube = kube

    async def get(self, path: str) -> Obj:
        body = await self._kube.get(path)
        if path.rstrip("/").endswith("/workloads") and isinstance(body.get("items"), list):
            body = {**body, "items": [group_named(wl) for wl in body["items"]]}
        return body
