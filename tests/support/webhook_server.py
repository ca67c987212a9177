"""A webhook server running on loopback with its lookups and certificate directory, served once a
certificate bundle is written; a Job's AdmissionReview request."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
from pathlib import Path
from typing import Any

import aiohttp

from reconciler.api import ObjectMeta
from reconciler.webhook.certmanager import write_cert_dir
from reconciler.webhook.certs import CertBundle, new_bundle
from reconciler.webhook.server import WebhookServer
from tests.support.builders import job_body

NOW = dt.datetime.now(dt.UTC)


class Lookups:
    def __init__(self) -> None:
        self.default_queues: set[str] = set()
        self.asked: list[str] = []
        self.broken = False

    async def default_local_queue_exists(self, namespace: str) -> bool:
        self.asked.append(namespace)
        if self.broken:
            raise TimeoutError("no answer from the API server within 3s")
        return namespace in self.default_queues

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        raise AssertionError("not asked by these webhooks")

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        raise AssertionError("not asked by these webhooks")

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        return False


class Running:
    def __init__(self, server: WebhookServer, lookups: Lookups, cert_dir: Path) -> None:
        self.server, self.lookups, self.cert_dir = server, lookups, cert_dir

    def client_context(self, bundle: CertBundle) -> ssl.SSLContext:
        return ssl.create_default_context(cadata=bundle.ca.cert_pem.decode())

    async def review(self, path: str, bundle: CertBundle, request: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        url = f"https://127.0.0.1:{self.server.bound_port}{path}"
        connector = aiohttp.TCPConnector(ssl=self.client_context(bundle))
        async with (
            aiohttp.ClientSession(connector=connector) as session,
            session.post(url, json=body) as resp,
        ):
            assert resp.status == 200, await resp.text()
            answer: dict[str, Any] = await resp.json()
        assert answer["apiVersion"] == "admission.k8s.io/v1"
        response: dict[str, Any] = answer["response"]
        assert response["uid"] == request["uid"]
        return response


async def serving(running: Running) -> CertBundle:
    bundle = new_bundle(["127.0.0.1"], NOW)
    write_cert_dir(running.cert_dir, bundle)
    await asyncio.wait_for(running.server.serving.wait(), 5)
    return bundle


def job_request(namespace: str = "team-a", **labels: str) -> dict[str, Any]:
    body = job_body("train", namespace=namespace, queue=None)
    body["metadata"]["labels"] = labels
    body["spec"]["suspend"] = False
    return {
        "uid": "u-1",
        "kind": {"group": "batch", "version": "v1", "kind": "Job"},
        "resource": {"group": "batch", "version": "v1", "resource": "jobs"},
        "operation": "CREATE",
        "namespace": namespace,
        "name": "train",
        "object": body,
    }
