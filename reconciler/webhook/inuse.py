"""ClusterQueues and ResourceFlavors get Kueue's in-use finalizer when they are created.

``kueue.x-k8s.io/resource-in-use`` keeps a ClusterQueue until no workload holds quota in it, and
a ResourceFlavor until no ClusterQueue lists it (the controller removes it then; it also adds it
to objects made while the webhook was not there).
"""

from __future__ import annotations

from reconciler.admission.review import PatchOp
from reconciler.api import ClusterQueue, ResourceFlavor
from reconciler.core.model.workloads import RESOURCE_IN_USE_FINALIZER

__all__ = ["add_in_use_finalizer"]


def add_in_use_finalizer(obj: ClusterQueue | ResourceFlavor) -> list[PatchOp]:
    finalizers = obj.metadata.finalizers
    if RESOURCE_IN_USE_FINALIZER in finalizers:
        return []
    if not finalizers:
        return [{"op": "add", "path": "/metadata/finalizers", "value": [RESOURCE_IN_USE_FINALIZER]}]
    return [{"op": "add", "path": "/metadata/finalizers/-", "value": RESOURCE_IN_USE_FINALIZER}]
