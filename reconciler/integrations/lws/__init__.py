"""LeaderWorkerSets (Kueue's framework ``leaderworkerset.x-k8s.io/leaderworkerset``): one job
per group of the set, written through its pods; their webhook and their registration.

`sets` is the integration of a group; `group` makes a set's groups from the set and its pods;
`webhook` is Kueue's LeaderWorkerSet webhook.
"""

from reconciler.api.resources import LEADERWORKERSETS

from ..pods import POD_ACCESS
from ..registration import Access, Registration
from .sets import LEADER_WORKER_SET
from .webhook import ROUTES

__all__ = ["LEADER_WORKER_SET", "REGISTRATION"]

REGISTRATION = Registration(
    LEADER_WORKER_SET,
    webhooks=ROUTES,
    access=(
        Access(
            LEADERWORKERSETS.group,
            (LEADERWORKERSETS.plural,),
            ("list", "watch"),
            "LeaderWorkerSets (integrations.frameworks: leaderworkerset.x-k8s.io/leaderworkerset):\n"
            "watched; their groups' pods are labelled, ungated and deleted, never the set.",
        ),
        *POD_ACCESS,
    ),
)
