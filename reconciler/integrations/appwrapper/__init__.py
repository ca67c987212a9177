"""AppWrapper (workload.codeflare.dev/v1beta2), Kueue's framework
``workload.codeflare.dev/appwrapper``: the integration (`integration`), its pod sets (`podsets`)
and its registration.

At the door, as Kueue's webhooks for the kind (``mappwrapper.kb.io``/``vappwrapper.kb.io``): the
namespace's ``default`` LocalQueue for an AppWrapper that names none, ``spec.suspend: true`` for
one the controller manages, and the queue-name rules of any job (Kueue has no rules of its own
for an AppWrapper; the AppWrapper controller's own webhook checks its components).

The objects an AppWrapper's controller creates for it (a batch/v1 Job, say) are its children:
their controller is the AppWrapper, so with their own framework enabled they are never admitted
on their own (`children`).
"""

from reconciler.admission.suspendable import SuspendableKind
from reconciler.api.appwrapper import APPWRAPPERS, AppWrapper

from ..registration import Access, Registration
from .integration import APPWRAPPER, AppWrapperIntegration, pod_set_infos
from .podsets import aw_pod_sets, infer, kueue_template

__all__ = [
    "APPWRAPPER",
    "DOOR",
    "REGISTRATION",
    "AppWrapperIntegration",
    "aw_pod_sets",
    "infer",
    "kueue_template",
    "pod_set_infos",
]

DOOR = SuspendableKind(
    APPWRAPPER.framework,
    AppWrapper,
    APPWRAPPERS.group,
    APPWRAPPERS.version,
    APPWRAPPERS.plural,
    "appwrapper",
)

REGISTRATION = Registration(
    APPWRAPPER,
    webhooks=DOOR.routes(
        mutate_why="Suspends an AppWrapper that names a queue (and sets the default LocalQueue) when it\n"
        "is created (integrations.frameworks: workload.codeflare.dev/appwrapper).",
        validate_why="Kueue's queue-name rules for AppWrappers\n"
        "(integrations.frameworks: workload.codeflare.dev/appwrapper).",
    ),
    access=(
        Access(
            APPWRAPPERS.group,
            (APPWRAPPERS.plural,),
            ("get", "list", "watch", "patch"),
            "AppWrappers (integrations.frameworks: workload.codeflare.dev/appwrapper): suspended, and\n"
            "started and restored with their components' podSetInfos, with a merge patch; read by the\n"
            "webhooks when they control an object.",
        ),
        Access(
            APPWRAPPERS.group,
            (f"{APPWRAPPERS.plural}/finalizers",),
            ("update",),
            "Their Workloads block their deletion (OwnerReferencesPermissionEnforcement;\n"
            "workload.codeflare.dev/appwrapper).",
        ),
    ),
)
