"""The plugin's outside: claims read from an API server (KubeClaimSource) and its command line."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from aiohttp import web

from e2e.testbed.kubeclient import KubeClient
from e2e.testbed.kubeletplugin import KubeClaimSource
from e2e.testbed.kubeletplugin.cli import node_spec, parser
from e2e.testbed.tests.allocated_claims import NODE, NS, allocated_claim

pytestmark = pytest.mark.timeout(60)


# --- reading claims from an API server ------------------------------------------------------


@pytest.mark.asyncio
async def test_kube_claim_source_reads_resource_v1_claims() -> None:
    claim = allocated_claim()
    seen: list[str] = []

    async def handler(request: web.Request) -> web.Response:
        seen.append(request.path)
        if request.match_info["name"] == claim["metadata"]["name"]:
            return web.json_response(claim)
        return web.json_response({"kind": "Status", "reason": "NotFound", "code": 404}, status=404)

    app = web.Application()
    app.router.add_get("/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = runner.addresses[0][1]
        async with KubeClient(f"http://127.0.0.1:{port}", ssl.create_default_context()) as kube:
            source = KubeClaimSource(kube, timeout=5)
            assert await source.get_claim(NS, "job-a-0-gpu-x7k2p") == claim
            assert await source.get_claim(NS, "missing") is None
    finally:
        await runner.cleanup()
    assert seen == [
        f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/job-a-0-gpu-x7k2p",
        f"/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims/missing",
    ]


# --- command line ---------------------------------------------------------------------------


def test_cli_defaults_are_the_kubelets_paths() -> None:
    args = parser().parse_args(["--node-name", NODE])
    assert args.registry_dir == Path("/var/lib/kubelet/plugins_registry")
    assert args.plugins_dir == Path("/var/lib/kubelet/plugins")
    assert args.cdi_dir == Path("/var/run/cdi")
    assert args.driver_name == "gpu.nvidia.com"
    node = node_spec(args)
    assert node.name == NODE
    assert node.gpus is not None
    assert (node.gpus.count, node.gpus.model) == (1, "Tesla-T4")


def test_cli_takes_gpus_from_a_testbed_spec(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("nodes:\n- name: a\n  gpus: {count: 2, model: A100-SXM4-40GB}\n- name: b\n")
    node = node_spec(parser().parse_args(["--node-name", "a", "--testbed-spec", str(spec)]))
    assert node.gpus is not None
    assert (node.gpus.count, node.gpus.model) == (2, "A100-SXM4-40GB")
    with pytest.raises(ValueError, match="not in"):
        node_spec(parser().parse_args(["--node-name", "c", "--testbed-spec", str(spec)]))
