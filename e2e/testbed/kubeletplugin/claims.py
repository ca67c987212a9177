"""Where the plugin reads ResourceClaims: the API server, or a dict in tests."""

from __future__ import annotations

import copy
from typing import Protocol

from e2e.testbed.kubeclient import ApiError, KubeClient, Obj, api_path

RESOURCE_V1 = "resource.k8s.io/v1"


class ClaimSource(Protocol):
    """Reads one ResourceClaim (resource.k8s.io/v1 JSON); None when it does not exist.

    Any other failure is raised; the plugin reports it as that claim's error.
    """

    async def get_claim(self, namespace: str, name: str) -> Obj | None: ...


class KubeClaimSource:
    """GET .../resource.k8s.io/v1/namespaces/<ns>/resourceclaims/<name> with a timeout."""

    def __init__(self, kube: KubeClient, timeout: float = 10.0) -> None:
        self._kube = kube
        self._timeout = timeout

    async def get_claim(self, namespace: str, name: str) -> Obj | None:
        path = api_path(RESOURCE_V1, "resourceclaims", namespace, name)
        try:
            return await self._kube.request("GET", path, timeout_seconds=self._timeout)
        except ApiError as err:
            if err.status == 404:
                return None
            raise


class InMemoryClaimSource:
    """Claims kept in a dict, keyed by (namespace, name); returns copies."""

    def __init__(self, claims: list[Obj] | None = None) -> None:
        self._claims: dict[tuple[str, str], Obj] = {}
        self.reads = 0
        for claim in claims or []:
            self.put(claim)

    def put(self, claim: Obj) -> None:
        meta = claim["metadata"]
        self._claims[(meta["namespace"], meta["name"])] = copy.deepcopy(claim)

    def delete(self, namespace: str, name: str) -> None:
        self._claims.pop((namespace, name), None)

    async def get_claim(self, namespace: str, name: str) -> Obj | None:
        self.reads += 1
        claim = self._claims.get((namespace, name))
        return copy.deepcopy(claim) if claim is not None else None
