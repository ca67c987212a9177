"""Plain pods (Kueue's framework ``pod``): single pods and pod groups, their webhook, and their
registration.

`pod` is the integration of a single pod; `group` and `group_plan` make a group of pods one job
(one Workload per complete group, a pod set per pod shape); `webhook` is Kueue's pod webhook.
"""

from reconciler.api.resources import PODS

from ..registration import Access, Registration
from .pod import POD
from .webhook import ROUTES

__all__ = ["POD", "POD_ACCESS", "REGISTRATION"]

# What writing to pods needs (the pod integration's, and any kind whose jobs are written through
# their pods).
POD_ACCESS = (
    Access(
        PODS.group,
        (PODS.plural,),
        ("patch", "delete"),
        "Plain pods (integrations.frameworks: pod) and the pods of serving groups: started\n"
        "(scheduling gate removed, flavor node labels injected) and their finalizer released with a\n"
        "merge patch; stopped by deletion (a pod group's pods first marked with the condition\n"
        "TerminationTarget on pods/status, as Kueue does); their Workloads block their deletion.",
    ),
    Access(PODS.group, ("pods/status",), ("patch",)),
    Access(PODS.group, ("pods/finalizers",), ("update",)),
)

REGISTRATION = Registration(POD, webhooks=ROUTES, access=POD_ACCESS)
