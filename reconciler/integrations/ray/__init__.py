"""KubeRay's RayCluster and RayJob (ray.io/v1), Kueue's frameworks ``ray.io/raycluster`` and
``ray.io/rayjob``: the integrations (`raycluster`, `rayjob`), what they share (`templates`),
Kueue's own rules at the door (`rules`) and their registrations.

At the door, as Kueue's webhooks for each kind (``mraycluster.kb.io``/``vraycluster.kb.io``,
``mrayjob.kb.io``/``vrayjob.kb.io``): the namespace's ``default`` LocalQueue for an object that
names none, ``spec.suspend: true`` for one the controller manages (not for a RayCluster whose
controller is a managed RayJob: it is the RayJob's), the queue-name rules of any job and Kueue's
rules for a managed RayCluster or RayJob.
"""

from reconciler.admission.suspendable import SuspendableKind
from reconciler.api.ray import RAYCLUSTERS, RAYJOBS, RayCluster, RayJob

from ..registration import Access, Registration
from .raycluster import RAYCLUSTER, RayClusterIntegration
from .rayjob import RAYJOB, SUBMITTER, RayJobIntegration, submitter_template
from .rules import ELASTIC_JOB_ANNOTATION, raycluster_rules, rayjob_rules
from .templates import HEAD

__all__ = [
    "CLUSTER_DOOR",
    "ELASTIC_JOB_ANNOTATION",
    "HEAD",
    "JOB_DOOR",
    "RAYCLUSTER",
    "RAYCLUSTER_REGISTRATION",
    "RAYJOB",
    "RAYJOB_REGISTRATION",
    "SUBMITTER",
    "RayClusterIntegration",
    "RayJobIntegration",
    "submitter_template",
]

CLUSTER_DOOR = SuspendableKind(
    RAYCLUSTER.framework,
    RayCluster,
    RAYCLUSTERS.group,
    RAYCLUSTERS.version,
    RAYCLUSTERS.plural,
    "raycluster",
    rules=raycluster_rules,
    size=lambda obj: sum(1 if ps.count is None else ps.count for ps in RAYCLUSTER.pod_sets(obj)),
    size_field="spec.workerGroupSpecs",
    elastic_job_kind=True,
)
JOB_DOOR = SuspendableKind(
    RAYJOB.framework,
    RayJob,
    RAYJOBS.group,
    RAYJOBS.version,
    RAYJOBS.plural,
    "rayjob",
    rules=rayjob_rules,
    elastic_job_kind=True,
)


def _access(plural: str, framework: str, why: str) -> tuple[Access, ...]:
    return (
        Access("ray.io", (plural,), ("get", "list", "watch", "patch"), why),
        Access(
            "ray.io",
            (f"{plural}/finalizers",),
            ("update",),
            f"Their Workloads block their deletion (OwnerReferencesPermissionEnforcement; {framework}).",
        ),
    )


RAYCLUSTER_REGISTRATION = Registration(
    RAYCLUSTER,
    webhooks=CLUSTER_DOOR.routes(
        mutate_why="Suspends a RayCluster that names a queue (and sets the default LocalQueue) when it is\n"
        "created, unless a managed RayJob controls it (integrations.frameworks: ray.io/raycluster).",
        validate_why="Kueue's queue-name rules and its rules for managed RayClusters\n"
        "(integrations.frameworks: ray.io/raycluster).",
    ),
    access=_access(
        RAYCLUSTERS.plural,
        RAYCLUSTER.framework,
        "RayClusters (integrations.frameworks: ray.io/raycluster): suspended, started and their pod\n"
        "templates restored with a merge patch; read by the webhooks when they control an object.",
    ),
)

RAYJOB_REGISTRATION = Registration(
    RAYJOB,
    webhooks=JOB_DOOR.routes(
        mutate_why="Suspends a RayJob that names a queue (and sets the default LocalQueue) when it is\n"
        "created (integrations.frameworks: ray.io/rayjob).",
        validate_why="Kueue's queue-name rules and its rules for managed RayJobs\n"
        "(integrations.frameworks: ray.io/rayjob).",
    ),
    access=_access(
        RAYJOBS.plural,
        RAYJOB.framework,
        "RayJobs (integrations.frameworks: ray.io/rayjob): suspended, started and their pod templates\n"
        "restored with a merge patch; read by the webhooks when they control a RayCluster or a pod.",
    ),
)
