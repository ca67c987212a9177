"""LeaderWorkerSets for the integration's tests: a set as a user writes it and as the set's
webhook stores it, and the pods the LWS controller makes for a group, as the pod webhook stores
them."""

from __future__ import annotations

import copy
from typing import Any

import msgspec
from reconciler.api.lws import LeaderWorkerSet
from reconciler.api.pods import ManagedPod
from reconciler.webhook.jobs import JobPolicy
from reconciler.webhook.leaderworkersets import default_lws
from reconciler.webhook.pods import default_pod

from tests.support.pods import apply_ops

__all__ = ["LWS_POLICY", "group_pods", "lws_body", "stored_lws"]

LWS_POLICY = JobPolicy(lws_enabled=True)


def _template(cpu: str, claim_template: str | None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
    spec: dict[str, Any] = {"containers": [container]}
    if claim_template is not None:
        container["resources"]["claims"] = [{"name": "gpu"}]
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": claim_template}]
    return {"spec": spec}


def lws_body(
    name: str, *, replicas: int = 1, size: int = 2, queue: str | None = "lq", leader: bool = True
) -> dict[str, Any]:
    """A set of `replicas` groups of `size` pods (a leader and size - 1 workers), each pod
    asking for one CPU and one GPU through the template `gpu-a`."""
    template: dict[str, Any] = {"size": size, "workerTemplate": _template("1", "gpu-a")}
    if leader:
        template["leaderTemplate"] = _template("1", "gpu-a")
    labels = {} if queue is None else {"kueue.x-k8s.io/queue-name": queue}
    return {
        "metadata": {"name": name, "namespace": "ns", "labels": labels},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": template},
    }


def stored_lws(body: dict[str, Any], policy: JobPolicy = LWS_POLICY) -> dict[str, Any]:
    """The set as the API stores it once the set's webhook has defaulted it."""
    lws = msgspec.json.decode(msgspec.json.encode(body), type=LeaderWorkerSet)
    return apply_ops(body, default_lws(lws, policy, default_queue_exists=False))


def group_pods(lws: dict[str, Any], index: int, policy: JobPolicy = LWS_POLICY) -> list[dict[str, Any]]:
    """The pods the LWS controller creates for group `index` (its leader `<lws>-<index>`, its
    workers `<lws>-<index>-<n>`), each as the pod webhook stores it."""
    name = lws["metadata"]["name"]
    template = lws["spec"]["leaderWorkerTemplate"]
    leader_name = f"{name}-{index}"
    out = []
    for n in range(template["size"]):
        role = "leaderTemplate" if n == 0 and "leaderTemplate" in template else "workerTemplate"
        body = copy.deepcopy(template[role])
        meta = body.setdefault("metadata", {})
        labels = meta.setdefault("labels", {})
        labels.update(
            {
                "leaderworkerset.sigs.k8s.io/name": name,
                "leaderworkerset.sigs.k8s.io/group-index": str(index),
                "leaderworkerset.sigs.k8s.io/worker-index": str(n),
            }
        )
        annotations = meta.setdefault("annotations", {})
        if n > 0:
            annotations["leaderworkerset.sigs.k8s.io/leader-name"] = leader_name
        meta.update(name=leader_name if n == 0 else f"{leader_name}-{n}", namespace="ns")
        body["status"] = {}
        pod = msgspec.json.decode(msgspec.json.encode(body), type=ManagedPod)
        ops = default_pod(pod, policy, default_queue_exists=False, managed_ancestor=False)
        out.append(apply_ops(body, ops))
    return out
