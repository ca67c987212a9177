"""Deployments and StatefulSets (Kueue's frameworks ``deployment`` and ``statefulset``): their
webhooks and registrations. Either turns the `pod` integration on for the pods they mark (Kueue's
implicitly enabled framework): a Deployment's pods are single pods, each with its Workload; a
StatefulSet's pods are one serving group with the set's Workload (`statefulset`).
"""

from reconciler.api.resources import STATEFULSETS

from ..pods import POD_ACCESS
from ..registration import Access, Registration
from . import deployment, statefulset_webhook
from .statefulset import STATEFUL_SET

__all__ = ["STATEFULSET_REGISTRATION", "STATEFUL_SET", "deployment"]

STATEFULSET_REGISTRATION = Registration(
    STATEFUL_SET,
    webhooks=statefulset_webhook.ROUTES,
    access=(
        Access(
            STATEFULSETS.group,
            (STATEFULSETS.plural,),
            ("list", "watch"),
            "StatefulSets (integrations.frameworks: statefulset): watched; their pods are labelled,\n"
            "ungated and deleted, never the set.",
        ),
        *POD_ACCESS,
    ),
    implies=("pod",),
)
