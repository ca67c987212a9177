"""The integration seam: what the controller knows about each kind of job, one module (or small
package) per kind, each registered once.

`base.Integration` is the protocol (Kueue's GenericJob); `decide.decide` the pure decision the
runtime performs; `registration.Registration` what a kind registers (its integration, webhooks
and API access); `registry.REGISTRATIONS` maps Kueue framework names to registrations.
"""

from .base import (
    GroupedSets,
    Integration,
    Lookup,
    Outcome,
    Patch,
    PodSetStart,
    ReadsReferences,
    Reference,
    SuspendableJob,
    TopologyPlacement,
    references_of,
)
from .batchjob import BATCH_JOB
from .children import CHILD_SUSPENDED, SUSPENDING_PARENT_ANNOTATION, controller_parent, suspend_child
from .decide import (
    PODSET_LABEL,
    SYSTEM_NAMESPACE,
    Adopt,
    AwaitPrebuilt,
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
    expected_pod_sets,
    is_managed,
    known_of,
    pod_set_starts,
)
from .equivalence import MatchMemo, equivalent
from .jobset import JOBSET
from .pods import POD
from .registration import Access, Registration
from .registry import (
    REGISTRATIONS,
    REGISTRY,
    Unimplemented,
    check_frameworks,
    describe_unimplemented,
    enabled,
    enabled_registrations,
    implied_only,
    register,
    registered,
    with_implied,
)

__all__ = [
    "BATCH_JOB",
    "CHILD_SUSPENDED",
    "JOBSET",
    "POD",
    "PODSET_LABEL",
    "REGISTRATIONS",
    "REGISTRY",
    "SUSPENDING_PARENT_ANNOTATION",
    "SYSTEM_NAMESPACE",
    "Access",
    "Adopt",
    "AwaitPrebuilt",
    "CreateWorkload",
    "DeleteMismatched",
    "Finish",
    "GroupedSets",
    "Integration",
    "Known",
    "Lookup",
    "MatchMemo",
    "Nothing",
    "Outcome",
    "Patch",
    "PodSetStart",
    "ReadsReferences",
    "Reference",
    "Registration",
    "Release",
    "Restore",
    "Start",
    "Step",
    "Suspend",
    "SuspendableJob",
    "TopologyPlacement",
    "Unimplemented",
    "UpdateMismatched",
    "check_frameworks",
    "controller_parent",
    "decide",
    "describe_unimplemented",
    "enabled",
    "enabled_registrations",
    "equivalent",
    "expected_pod_sets",
    "implied_only",
    "is_managed",
    "known_of",
    "pod_set_starts",
    "references_of",
    "register",
    "registered",
    "suspend_child",
    "with_implied",
]
