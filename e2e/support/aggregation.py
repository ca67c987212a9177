"""Kueue's visibility API behind the test-bed's aggregation layer: the shipped APIServices
(manifests/visibility.yaml, v1beta2 and v1beta1) pointed at a Service of type ExternalName
`localhost` and a loopback port (the test-bed has no pod network), with the shipped viewer roles.
Whoever serves the port (the controller, or Kueue's own visibility server) answers every request
the API server forwards through its front proxy. With `whatif`, the controller's dry run
(whatif.dra-quota.dev v1alpha1, beyond Kueue) too, with its shipped role."""

from __future__ import annotations

from functools import partial
from typing import Any

import yaml

from e2e.support.deploy import ROOT
from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import ApiError
from e2e.testbed.scenario import wait_for

__all__ = [
    "VERSIONS",
    "apiservices",
    "bind_user",
    "delete_all",
    "register_visibility",
    "unregister_visibility",
    "viewer_roles",
]

Obj = dict[str, Any]
VERSIONS = ("v1beta2", "v1beta1")
WHATIF_GROUP = "whatif.dra-quota.dev"
SERVICE_NAMESPACE = "visibility-e2e"
SERVICE = "dra-quota-reconciler-visibility"


def apiservices(port: int, whatif: bool = False) -> list[Obj]:
    """The shipped APIServices (Kueue's group; with `whatif` the dry run's too), pointed at the
    test's Service and the controller's port."""
    shipped = [
        d
        for d in yaml.safe_load_all((ROOT / "manifests" / "visibility.yaml").read_text())
        if d and d["kind"] == "APIService" and (whatif or d["spec"]["group"] != WHATIF_GROUP)
    ]
    kueues = [d["spec"]["version"] for d in shipped if d["spec"]["group"] != WHATIF_GROUP]
    assert sorted(kueues) == sorted(VERSIONS)
    for doc in shipped:
        doc["spec"]["service"] = {"name": SERVICE, "namespace": SERVICE_NAMESPACE, "port": port}
    return shipped


def viewer_roles() -> list[Obj]:
    return [
        d
        for d in yaml.safe_load_all((ROOT / "manifests" / "visibility.yaml").read_text())
        if d and d["kind"] == "ClusterRole"
    ]


async def available(kube: KubeClient, name: str) -> bool:
    service = await kube.get(api_path("apiregistration.k8s.io/v1", "apiservices", name=name))
    conditions = service.get("status", {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


async def register_visibility(kube: KubeClient, port: int, whatif: bool = False) -> None:
    await kube.create(
        api_path("v1", "namespaces"),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SERVICE_NAMESPACE}},
    )
    await kube.create(
        api_path("v1", "services", SERVICE_NAMESPACE),
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": SERVICE_NAMESPACE},
            "spec": {"type": "ExternalName", "externalName": "localhost"},
        },
    )
    for doc in [*apiservices(port, whatif), *viewer_roles()]:
        group_version = (
            "apiregistration.k8s.io/v1" if doc["kind"] == "APIService" else "rbac.authorization.k8s.io/v1"
        )
        plural = "apiservices" if doc["kind"] == "APIService" else "clusterroles"
        await kube.create(api_path(group_version, plural), doc)
    for doc in apiservices(port, whatif):
        name = doc["metadata"]["name"]
        await wait_for(f"APIService {name} to be Available", partial(available, kube, name), within=60)


async def unregister_visibility(kube: KubeClient) -> None:
    paths = [
        api_path("apiregistration.k8s.io/v1", "apiservices", name=d["metadata"]["name"])
        for d in apiservices(1, whatif=True)
    ]
    paths += [
        api_path("rbac.authorization.k8s.io/v1", "clusterroles", name=d["metadata"]["name"])
        for d in viewer_roles()
    ]
    paths.append(api_path("v1", "namespaces", name=SERVICE_NAMESPACE))
    await delete_all(kube, paths)


async def delete_all(kube: KubeClient, paths: list[str]) -> None:
    """Delete each object; one already gone is fine."""
    for path in paths:
        try:
            await kube.delete(path)
        except ApiError as err:
            if err.status != 404:
                raise


async def bind_user(kube: KubeClient, namespace: str, cluster_role: str, user: str) -> None:
    """A RoleBinding in `namespace` giving `user` a shipped ClusterRole (named after the role)."""
    rbac = "rbac.authorization.k8s.io"
    await kube.create(
        api_path(f"{rbac}/v1", "rolebindings", namespace),
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": cluster_role, "namespace": namespace},
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": cluster_role},
            "subjects": [{"kind": "User", "name": user, "apiGroup": rbac}],
        },
    )
