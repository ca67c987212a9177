"""The pod webhooks of a scenario with the pod framework, on both sides, scoped to its namespaces.

Kueue's mpod/vpod (as installed: its kustomization gives them a namespaceSelector leaving out
kube-system and kueue-system) and the controller's shipped ones (leaving out kube-system and
dra-quota-system) would see every pod of the cluster. Here each keeps its own selector and gets
one more expression, `kubernetes.io/metadata.name In [the scenario's namespaces]`, so the API
server calls them for the scenario's pods only: the intersection of what a real install covers
and the scenario. Before the first step the runner creates those namespaces (a scenario applies
them again) and waits until the API server calls the pod webhook: a dry-run create of a
queue-named pod in the first of them comes back with Kueue's scheduling gate.
"""

from __future__ import annotations

import copy
from typing import Any

from e2e.support.deploy import apply_objects
from e2e.testbed import KubeClient, api_path
from e2e.testbed.scenario import wait_for

Obj = dict[str, Any]
CORE_GROUP = ""  # the pods' API group
SCHEDULING_GATE = "kueue.x-k8s.io/admission"
NAME_LABEL = "kubernetes.io/metadata.name"


def is_pod_hook(hook: Obj) -> bool:
    groups = {g for rule in hook.get("rules") or [] for g in rule.get("apiGroups") or []}
    return groups == {CORE_GROUP}


def scoped_to(hook: Obj, namespaces: tuple[str, ...]) -> Obj:
    """The webhook with `NAME_LABEL In namespaces` added to its namespaceSelector (ANDed with
    what it had)."""
    hook = copy.deepcopy(hook)
    selector = hook.get("namespaceSelector") or {}
    expressions = list(selector.get("matchExpressions") or [])
    expressions.append({"key": NAME_LABEL, "operator": "In", "values": sorted(namespaces)})
    hook["namespaceSelector"] = {**selector, "matchExpressions": expressions}
    return hook


async def create_namespaces(kube: KubeClient, namespaces: tuple[str, ...]) -> None:
    await apply_objects(
        kube, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces]
    )


def probe_pod(namespace: str, parent: str | None = None) -> Obj:
    """A queue-named pod; with `parent`, marked as suspended by that framework (a pod its
    pod template gives every pod of a Deployment or StatefulSet)."""
    annotations = {} if parent is None else {"kueue.x-k8s.io/pod-suspending-parent": parent}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "webhook-probe",
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "webhook-probe"},
            "annotations": annotations,
        },
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
    }


async def wait_until_pods_are_gated(
    kube: KubeClient, namespace: str, within: float = 60.0, parent: str | None = None
) -> None:
    """Until the API server calls the pod webhook: a dry-run create of a queue-named pod comes
    back with the scheduling gate."""

    async def gated() -> bool:
        created = await kube.request(
            "POST",
            api_path("v1", "pods", namespace),
            params={"dryRun": "All"},
            body=probe_pod(namespace, parent),
        )
        return SCHEDULING_GATE in [g["name"] for g in created["spec"].get("schedulingGates") or []]

    await wait_for(f"the pod webhook to gate pods in {namespace}", gated, within=within, interval=0.5)
