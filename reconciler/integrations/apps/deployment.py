"""Deployments (Kueue's framework ``deployment``): Kueue v0.18.1's Deployment webhooks.

A Deployment is never a job itself (Kueue's reconciler for it does nothing): each pod its
ReplicaSets make is a single pod of the `pod` integration, with a Workload of its own, held at
the admission gate until that Workload is admitted. Enabling ``deployment`` turns the `pod`
integration on for those pods only (Kueue's implicitly enabled framework).

Defaulting, on create and update: a Deployment without a queue name gets
``kueue.x-k8s.io/queue-name: default`` when its namespace has that LocalQueue; a managed one (a
queue name, or ``manageJobsWithoutQueueName`` in a managed namespace) has its pod template marked:
``kueue.x-k8s.io/pod-suspending-parent: deployment`` (the pod webhook then holds each pod at the
gate, without Kueue's finalizer), ``kueue.x-k8s.io/managed: "true"``, its queue name and its
workload priority class. A rolling update or a scale-up makes new pods, each waiting for quota
like any pod; a scale-down deletes pods, whose quota returns.

Validation: the queue name a DNS subdomain, no elastic-job annotation; on update the queue name
cannot change once a replica is ready (``status.readyReplicas`` > 0) nor be removed, and the
workload priority class cannot be added once a replica is ready nor ever removed.
"""

from __future__ import annotations

from reconciler.admission.fielderrors import FieldError
from reconciler.admission.queue_rules import JobPolicy
from reconciler.admission.review import AdmissionRequest, PatchOp, Verdict, decode_object
from reconciler.admission.routes import Lookups, Route, decoded, default_queue
from reconciler.api.apps import Deployment
from reconciler.core.model.workloads import QUEUE_NAME_LABEL
from reconciler.core.primitives.priority import PRIORITY_CLASS_LABEL

from ..children import SUSPENDING_PARENT_ANNOTATION
from ..pods import POD_ACCESS
from ..pods.pod import MANAGED_LABEL, MANAGED_VALUE
from ..registration import Registration
from .common import common_create_errors, common_update_errors, mark_template, queue_defaulted, should_hold

__all__ = [
    "DEPLOYMENT_FRAMEWORK",
    "REGISTRATION",
    "ROUTES",
    "default_deployment",
    "validate_deployment_update",
]

DEPLOYMENT_FRAMEWORK = "deployment"
_GVK = "apps/v1, Kind=Deployment"


def default_deployment(
    deployment: Deployment, *, default_queue_exists: bool, hold: bool | None
) -> list[PatchOp]:
    """The JSON patch that defaults a Deployment: its default queue, then, when it is to be
    managed (`hold`; None: by its queue name alone), its pod template's marks."""
    labels, ops = queue_defaulted(deployment.metadata, default_queue_exists=default_queue_exists)
    if not (bool(labels.get(QUEUE_NAME_LABEL)) if hold is None else hold):
        return ops
    pod_labels = {MANAGED_LABEL: MANAGED_VALUE}
    pod_labels |= {k: labels[k] for k in (QUEUE_NAME_LABEL, PRIORITY_CLASS_LABEL) if labels.get(k)}
    marks = {SUSPENDING_PARENT_ANNOTATION: DEPLOYMENT_FRAMEWORK}
    return ops + mark_template(deployment.spec.template, pod_labels, marks)


def validate_deployment_update(new: Deployment, old: Deployment) -> list[FieldError]:
    return common_update_errors(
        new.metadata, old.metadata, old_ready_replicas=old.status.ready_replicas, gvk=_GVK
    )


async def _mutate(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    if not policy.on(DEPLOYMENT_FRAMEWORK):
        return Verdict.allow()
    deployment, errors = decode_object(request.object, Deployment)
    if deployment is None:
        return Verdict.deny(errors)
    namespace = request.namespace or deployment.metadata.namespace
    exists = await default_queue(lookups, not deployment.metadata.labels.get(QUEUE_NAME_LABEL), namespace)
    if isinstance(exists, Verdict):
        return exists
    labels, _ = queue_defaulted(deployment.metadata, default_queue_exists=exists)
    try:
        hold = await should_hold(labels, namespace, policy, lookups)
    except Exception as err:
        return Verdict.fail(
            f"cannot tell whether deployment {namespace}/{deployment.metadata.name} is managed: {err}"
        )
    return Verdict.allow(default_deployment(deployment, default_queue_exists=exists, hold=hold))


async def _validate(request: AdmissionRequest, policy: JobPolicy, lookups: Lookups) -> Verdict:
    if not policy.on(DEPLOYMENT_FRAMEWORK):
        return Verdict.allow()
    new, old, errors = decoded(request, Deployment)
    if new is None or errors:
        return Verdict.deny(errors)
    if old is None:
        return Verdict.judge(common_create_errors(new.metadata, _GVK))
    return Verdict.judge(validate_deployment_update(new, old))


_OPERATIONS = ("CREATE", "UPDATE")

ROUTES = (
    Route(
        "/mutate-apps-v1-deployment",
        "mdeployment.kb.io",
        "apps",
        "v1",
        "deployments",
        True,
        _OPERATIONS,
        _mutate,
        why="Marks a managed Deployment's pod template (queue name, managed, suspended by its parent)\n"
        "so the pod webhook holds each of its pods for a Workload of its own (integrations.frameworks:\n"
        "deployment; otherwise it leaves Deployments as they are).",
    ),
    Route(
        "/validate-apps-v1-deployment",
        "vdeployment.kb.io",
        "apps",
        "v1",
        "deployments",
        False,
        _OPERATIONS,
        _validate,
        why="Kueue's rules for Deployments: queue name (immutable once a replica is ready), workload\n"
        "priority class (integrations.frameworks: deployment).",
    ),
)

# The controller never reads Deployments: their pods are single pods of the pod integration.
REGISTRATION = Registration(
    None, webhooks=ROUTES, access=POD_ACCESS, name=DEPLOYMENT_FRAMEWORK, implies=("pod",)
)
