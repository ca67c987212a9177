"""Plain pods for the pod integration's tests: a pod as a user writes it, and the same pod as
the pod webhook (mpod.kb.io) stores it (its JSON patch applied)."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
from reconciler.api.pods import ManagedPod
from reconciler.webhook.jobs import JobPolicy
from reconciler.webhook.jobs import PodPolicy
from reconciler.webhook.pods import default_pod

__all__ = ["POD_POLICY", "apply_ops", "pod_body", "stored_pod"]

QUEUE = "kueue.x-k8s.io/queue-name"
POD_POLICY = JobPolicy(pods=PodPolicy(enabled=True))


def pod_body(
    name: str, *, queue: str | None = "lq", claim_template: str | None = "gpu-a", cpu: str = "1"
) -> dict[str, Any]:
    """A pod asking for `cpu` and one device through `claim_template` (None: no claim)."""
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    spec: dict[str, Any] = {"containers": [container]}
    if claim_template is not None:
        container["resources"]["claims"] = [{"name": "gpu"}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim_template}]
    labels = {} if queue is None else {QUEUE: queue}
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels}, "spec": spec, "status": {}}


def apply_ops(body: dict[str, Any], ops: list[Any]) -> dict[str, Any]:
    """A JSON patch of `add` operations (what the webhooks return), applied."""
    out = copy.deepcopy(body)
    for op in ops:
        assert op["op"] == "add", op
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target: Any = out
        for part in parents:
            target = target[part]
        if last == "-":
            target.append(op["value"])
        else:
            target[last] = op["value"]
    return out


def stored_pod(
    body: dict[str, Any], policy: JobPolicy = POD_POLICY, *, default_queue: bool = False
) -> dict[str, Any]:
    """The pod as the API stores it once the pod webhook has defaulted it."""
    pod = msgspec.json.decode(msgspec.json.encode(body), type=ManagedPod)
    ops = default_pod(pod, policy, default_queue_exists=default_queue, managed_ancestor=False)
    return apply_ops(body, ops)
