"""A Lease kept with apiserver semantics, behind the fake API server."""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web
from reconciler.api.resources import LEASES

from tests.support.fake_apiserver import status_body

NS, NAME = "kueue-system", "dra-quota-reconciler"
ITEM = LEASES.item_path(NS, NAME)
COLLECTION = LEASES.list_path(NS)


class LeaseStore:
    """One Lease with apiserver semantics: resourceVersion bumps, 409 on a stale update."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 100
        self.updates: list[dict[str, Any]] = []

    def put(self, spec: dict[str, Any]) -> None:
        """Someone else writes the Lease."""
        self.rv += 1
        self.lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": NAME, "namespace": NS, "resourceVersion": str(self.rv)},
            "spec": spec,
        }

    @property
    def spec(self) -> dict[str, Any]:
        assert self.lease is not None
        spec: dict[str, Any] = self.lease["spec"]
        return spec

    async def get(self, request: web.Request) -> web.StreamResponse:
        if self.lease is None:
            return web.json_response(status_body(404, "NotFound", "leases not found"), status=404)
        return web.json_response(self.lease)

    async def create(self, request: web.Request) -> web.StreamResponse:
        if self.lease is not None:
            return web.json_response(status_body(409, "AlreadyExists", "already exists"), status=409)
        body = json.loads(await request.read())
        self.put(body["spec"])
        return web.json_response(self.lease, status=201)

    async def update(self, request: web.Request) -> web.StreamResponse:
        body = json.loads(await request.read())
        self.updates.append(body)
        if self.lease is None or body["metadata"].get("resourceVersion") != str(self.rv):
            return web.json_response(status_body(409, "Conflict", "the object has been modified"), status=409)
        self.put(body["spec"])
        return web.json_response(self.lease)
