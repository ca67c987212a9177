"""A Warning Event on the controller's own Deployment when its Configuration enables Kueue
frameworks this controller does not implement: whoever runs `kubectl describe deployment` sees
it, not only whoever reads the log.

The Deployment is named from the pod the controller runs in, without reading it: the manifests
give the pod's name, namespace and ``pod-template-hash`` label through the downward API
(``POD_NAME``, ``POD_NAMESPACE``, ``POD_TEMPLATE_HASH``), and a Deployment's pod is named
``<deployment>-<hash>-<suffix>``. Outside a pod, or in a pod no Deployment made, the warning
line at start-up is the only notice.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import structlog

from reconciler.api import ObjectMeta
from reconciler.api.resources import EVENTS
from reconciler.api.times import now_rfc3339
from reconciler.integrations import Unimplemented, describe_unimplemented
from reconciler.kube.client import KubeClient
from reconciler.kube.errors import KubeError
from reconciler.runtime.shared.events import event_body

__all__ = ["REASON", "announce_unimplemented", "owning_deployment"]

log = structlog.get_logger(__name__)

REASON = "FrameworksNotImplemented"
REQUEST_TIMEOUT_SECONDS = 10.0


def owning_deployment(pod_name: str, template_hash: str) -> str | None:
    """The Deployment a pod of this name and template hash belongs to (None: not a Deployment's)."""
    marker = f"-{template_hash}-"
    at = pod_name.rfind(marker)
    if not template_hash or at <= 0 or not pod_name[at + len(marker) :]:
        return None
    return pod_name[:at]


async def announce_unimplemented(
    client: KubeClient, unimplemented: Sequence[Unimplemented], environ: Mapping[str, str] = os.environ
) -> None:
    """Post one Warning Event naming them on the controller's Deployment (see the module)."""
    pod_name, namespace = environ.get("POD_NAME", ""), environ.get("POD_NAMESPACE", "")
    if not unimplemented or not pod_name or not namespace:
        return
    deployment = owning_deployment(pod_name, environ.get("POD_TEMPLATE_HASH", ""))
    if deployment is None:
        log.info("the controller's pod is no Deployment's; the frameworks are named in the log only")
        return
    body = event_body(
        api_version="apps/v1",
        kind="Deployment",
        meta=ObjectMeta(name=deployment, namespace=namespace),
        event_type="Warning",
        reason=REASON,
        message=describe_unimplemented(unimplemented),
        now=now_rfc3339(),
        instance=pod_name,
    )
    try:
        await client.request("POST", EVENTS.list_path(namespace), body=body, timeout=REQUEST_TIMEOUT_SECONDS)
    except KubeError as err:
        log.warning("could not post the Event about unimplemented frameworks", error=str(err))
