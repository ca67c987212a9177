"""The test-bed's one Kubernetes client authenticating with a token file, as the kubelet plugin
does in a pod (``KubeClient.in_cluster``): the token is read from the file, not from a kubeconfig."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from aiohttp import web

from e2e.testbed.kubeclient import KubeClient, in_cluster_available

pytestmark = pytest.mark.timeout(30)


@pytest.mark.asyncio
async def test_a_token_file_is_read_and_sent_as_bearer(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("first-token\n")
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({"kind": "Namespace", "metadata": {"name": request.match_info["name"]}})

    app = web.Application()
    app.router.add_get("/api/v1/namespaces/{name}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        server = f"http://127.0.0.1:{port}"
        async with KubeClient(server, ssl.create_default_context(), token_file=token_file) as kube:
            assert (await kube.get("/api/v1/namespaces/a"))["metadata"]["name"] == "a"
            token_file.write_text("rotated-token\n")  # re-read after a minute, not on every call
            await kube.get("/api/v1/namespaces/b")
    finally:
        await runner.cleanup()
    assert seen == ["Bearer first-token", "Bearer first-token"]


def test_in_cluster_needs_the_service_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert not in_cluster_available()
