"""The integration seam: what the controller knows about each kind of job, one module per kind.

`base.Integration` is the protocol (Kueue's GenericJob); `decide.decide` the pure decision the
runtime performs; `registry.REGISTRY` maps Kueue framework names to integrations.
"""

from .base import Integration, Outcome, Patch, PodSetStart, SuspendableJob
from .batchjob import BATCH_JOB
from .children import CHILD_SUSPENDED, controller_parent, suspend_child
from .decide import (
    PODSET_LABEL,
    SYSTEM_NAMESPACE,
    CreateWorkload,
    DeleteMismatched,
    Finish,
    Known,
    Nothing,
    Release,
    Restore,
    Start,
    Step,
    Suspend,
    UpdateMismatched,
    decide,
    is_managed,
    known_of,
    pod_set_starts,
)
from .equivalence import MatchMemo, equivalent
from .jobset import JOBSET
from .pod import POD
from .registry import REGISTRY, enabled

__all__ = [
    "BATCH_JOB",
    "CHILD_SUSPENDED",
    "JOBSET",
    "POD",
    "PODSET_LABEL",
    "REGISTRY",
    "SYSTEM_NAMESPACE",
    "CreateWorkload",
    "DeleteMismatched",
    "Finish",
    "Integration",
    "Known",
    "MatchMemo",
    "Nothing",
    "Outcome",
    "Patch",
    "PodSetStart",
    "Release",
    "Restore",
    "Start",
    "Step",
    "Suspend",
    "SuspendableJob",
    "UpdateMismatched",
    "controller_parent",
    "decide",
    "enabled",
    "equivalent",
    "is_managed",
    "known_of",
    "pod_set_starts",
    "suspend_child",
]
