"""Fast tests of the fake DRA driver's kubelet plugin, driven by a fake kubelet over unix sockets.

No control plane: claims come from an in-memory ClaimSource (and, in one test,
from a tiny local HTTP server standing in for the API server).
"""

from __future__ import annotations

import asyncio
import json
import shutil
import socket
import ssl
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
import pytest_asyncio
from aiohttp import web

from e2e.testbed.fakedriver import gpu_devices, gpu_uuid
from e2e.testbed.kubeclient import KubeClient
from e2e.testbed.kubeletplugin import (
    ClaimRef,
    DraPluginClient,
    FakeKubelet,
    InMemoryClaimSource,
    KubeClaimSource,
    KubeletPlugin,
    PluginConfig,
    PreparedDevice,
    PrepareResult,
    RegistrationError,
    claim_drivers,
    pod_claim_names,
    register_plugin,
)
from e2e.testbed.kubeletplugin.cli import node_spec, parser
from e2e.testbed.kubeletplugin.grpcapi import DRA_V1_SERVICE, DRA_V1BETA1_SERVICE
from e2e.testbed.kubeletplugin.kubelet_registration import get_plugin_info
from e2e.testbed.protos.gen.dra.v1 import api_pb2 as dra_v1
from e2e.testbed.protos.gen.dra.v1beta1 import api_pb2 as dra_v1beta1
from e2e.testbed.scenario import single_gpu_claim_spec
from e2e.testbed.spec import default_spec

Obj = dict[str, Any]

NODE = "gpu-node-1"
DRIVER = "gpu.nvidia.com"
NS = "team-a"
CLAIM_UID = "6f1d9b4e-2c3a-4f5e-9a8b-0c1d2e3f4a5b"
POD_UID = "0a7c3e55-9d2b-4e61-8f0a-1b2c3d4e5f60"
T4_UUID = gpu_uuid(NODE, 0)

pytestmark = pytest.mark.timeout(60)


def allocated_claim(
    *,
    uid: str = CLAIM_UID,
    name: str = "job-a-0-gpu-x7k2p",
    results: list[Obj] | None = None,
    allocated: bool = True,
) -> Obj:
    """A ResourceClaim as the API server returns it after the scheduler allocated it."""
    if results is None:
        results = [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-0"}]
    claim: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid,
            "resourceVersion": "4711",
            "generateName": "job-a-0-gpu-",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "job-a-0",
                    "uid": POD_UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": ["resource.kubernetes.io/delete-protection"],
        },
        "spec": single_gpu_claim_spec(),
        "status": {},
    }
    if allocated:
        claim["status"] = {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}
                    ]
                },
                "allocationTimestamp": "2026-11-29T18:00:00Z",
            },
            "reservedFor": [{"resource": "pods", "name": "job-a-0", "uid": POD_UID}],
        }
    return claim


def ref(claim: Obj) -> ClaimRef:
    meta = claim["metadata"]
    return ClaimRef(namespace=meta["namespace"], uid=meta["uid"], name=meta["name"])


def cdi_id(claim_uid: str, device: str) -> str:
    return f"k8s.gpu.nvidia.com/gpu={claim_uid}-{device}"


def expected_device(
    claim_uid: str = CLAIM_UID, device: str = "gpu-0", request: str = "gpu"
) -> PreparedDevice:
    """A device as the kubelet sees it in the response (no uuid on the wire)."""
    return PreparedDevice(
        request_names=(request,),
        pool_name=NODE,
        device_name=device,
        cdi_device_ids=(cdi_id(claim_uid, device),),
    )


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A short temp dir: unix socket paths must stay under 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="kp-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def config(short_dir: Path) -> PluginConfig:
    return PluginConfig(
        node_name=NODE,
        registry_dir=short_dir / "registry",
        plugins_dir=short_dir / "plugins",
        cdi_dir=short_dir / "cdi",
    )


@pytest.fixture
def claims() -> InMemoryClaimSource:
    return InMemoryClaimSource([allocated_claim()])


@pytest_asyncio.fixture
async def plugin(config: PluginConfig, claims: InMemoryClaimSource) -> AsyncIterator[KubeletPlugin]:
    async with KubeletPlugin(config, claims, stop_grace=1.0) as running:
        yield running


@pytest_asyncio.fixture
async def kubelet(config: PluginConfig) -> AsyncIterator[FakeKubelet]:
    fake = FakeKubelet(config.registry_dir, call_timeout=10.0)
    try:
        yield fake
    finally:
        await fake.close()


@pytest_asyncio.fixture(params=["v1.DRAPlugin", "v1beta1.DRAPlugin"])
async def dra(request: pytest.FixtureRequest, plugin: KubeletPlugin) -> AsyncIterator[DraPluginClient]:
    """A client of the plugin's DRA socket, once per service version."""
    async with DraPluginClient(plugin.config.dra_socket, request.param, timeout=10.0) as client:
        yield client


def cdi_files(config: PluginConfig) -> list[str]:
    return sorted(p.name for p in config.cdi_dir.iterdir())


# --- registration ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_sockets_are_where_the_kubelet_looks(plugin: KubeletPlugin, short_dir: Path) -> None:
    reg = short_dir / "registry" / "gpu.nvidia.com-reg.sock"
    dra_sock = short_dir / "plugins" / "gpu.nvidia.com" / "dra.sock"
    assert plugin.config.registration_socket == reg
    assert plugin.config.dra_socket == dra_sock
    assert reg.is_socket()
    assert dra_sock.is_socket()


@pytest.mark.asyncio
async def test_get_info(plugin: KubeletPlugin) -> None:
    info = await get_plugin_info(plugin.config.registration_socket)
    assert info.type == "DRAPlugin"
    assert info.name == "gpu.nvidia.com"
    assert info.endpoint == str(plugin.config.dra_socket)
    assert Path(info.endpoint).is_absolute()
    assert info.supported_versions == ("v1.DRAPlugin", "v1beta1.DRAPlugin")
    assert plugin.registration.info_calls == 1
    assert plugin.registration.registered is None


@pytest.mark.asyncio
async def test_registration_handshake(plugin: KubeletPlugin) -> None:
    registered = await register_plugin(plugin.config.registration_socket)
    assert registered.driver_name == "gpu.nvidia.com"
    assert registered.version == "v1.DRAPlugin"
    assert registered.endpoint == plugin.config.dra_socket
    assert plugin.registration.registered is True
    assert plugin.registration.notifications == [(True, "")]
    async with asyncio.timeout(5):
        await plugin.registration.wait_registered()


@pytest.mark.asyncio
async def test_older_kubelet_chooses_v1beta1(plugin: KubeletPlugin) -> None:
    registered = await register_plugin(plugin.config.registration_socket, supported=("v1beta1.DRAPlugin",))
    assert registered.version == "v1beta1.DRAPlugin"


@pytest.mark.asyncio
async def test_refused_registration_is_recorded(plugin: KubeletPlugin) -> None:
    with pytest.raises(RegistrationError, match="none of the versions"):
        await register_plugin(plugin.config.registration_socket, supported=("v2.DRAPlugin",))
    assert plugin.registration.registered is False
    assert "none of the versions" in plugin.registration.error


@pytest.mark.asyncio
async def test_fake_kubelet_discovers_and_forgets_plugins(
    config: PluginConfig, claims: InMemoryClaimSource, kubelet: FakeKubelet
) -> None:
    config.registry_dir.mkdir(parents=True)
    (config.registry_dir / "not-a-socket.txt").write_text("ignored")
    await kubelet.scan()
    assert kubelet.plugins == {}
    async with KubeletPlugin(config, claims, stop_grace=1.0) as running:
        await kubelet.scan()
        assert set(kubelet.plugins) == {"gpu.nvidia.com"}
        assert kubelet.plugins["gpu.nvidia.com"].version == "v1.DRAPlugin"
        assert running.registration.registered is True
        await kubelet.scan()  # already known: no second handshake
        assert running.registration.info_calls == 1
    assert not config.registration_socket.exists()
    assert not config.dra_socket.exists()
    await kubelet.scan()
    assert kubelet.plugins == {}


@pytest.mark.asyncio
async def test_stale_socket_files_are_replaced(config: PluginConfig, claims: InMemoryClaimSource) -> None:
    config.registry_dir.mkdir(parents=True)
    config.plugin_dir.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(config.registration_socket))  # bound, never listening: a dead plugin's
    stale.close()
    config.dra_socket.write_text("left over")
    async with KubeletPlugin(config, claims, stop_grace=1.0):
        registered = await register_plugin(config.registration_socket)
        assert registered.endpoint == config.dra_socket


# --- prepare / unprepare ----------------------------------------------------------------------


@pytest.mark.asyncio
async def test_prepare_and_unprepare(dra: DraPluginClient, plugin: KubeletPlugin) -> None:
    claim = allocated_claim()
    result = await dra.prepare([ref(claim)])
    assert result == {CLAIM_UID: PrepareResult(devices=(expected_device(),))}
    spec_file = plugin.config.cdi_dir / f"k8s.gpu.nvidia.com-gpu_{CLAIM_UID}.json"
    assert spec_file.is_file()
    assert set(plugin.service.prepared) == {CLAIM_UID}

    assert await dra.unprepare([ref(claim)]) == {CLAIM_UID: ""}
    assert not spec_file.exists()
    assert cdi_files(plugin.config) == []
    assert plugin.service.prepared == {}


@pytest.mark.asyncio
async def test_cdi_spec_content(plugin: KubeletPlugin) -> None:
    async with DraPluginClient(plugin.config.dra_socket) as dra:
        await dra.prepare([ref(allocated_claim())])
    spec_file = plugin.config.cdi_dir / f"k8s.gpu.nvidia.com-gpu_{CLAIM_UID}.json"
    assert json.loads(spec_file.read_text()) == {
        "cdiVersion": "0.6.0",
        "kind": "k8s.gpu.nvidia.com/gpu",
        "containerEdits": {
            "env": [
                f"NVIDIA_VISIBLE_DEVICES={T4_UUID}",
                "DRA_RESOURCE_DRIVER_NAME=gpu.nvidia.com",
                "KUBERNETES_NODE_NAME=gpu-node-1",
            ]
        },
        "devices": [
            {
                "name": f"{CLAIM_UID}-gpu-0",
                "containerEdits": {
                    "env": [
                        "GPU_DEVICE_0=gpu-0",
                        f"GPU_DEVICE_0_UUID={T4_UUID}",
                        f"GPU_DEVICE_0_RESOURCE_CLAIM={CLAIM_UID}",
                        "GPU_DEVICE_0_REQUEST=gpu",
                    ]
                },
            }
        ],
    }
    assert spec_file.read_text().endswith("}\n")
    # No temp files left behind for the runtime's CDI cache to trip over.
    assert cdi_files(plugin.config) == [spec_file.name]


def test_uuid_in_cdi_matches_the_published_slice() -> None:
    published = gpu_devices(default_spec().nodes[0])
    assert published[0]["name"] == "gpu-0"
    assert published[0]["attributes"]["uuid"] == {"string": T4_UUID}
    assert T4_UUID.startswith("GPU-")


@pytest.mark.asyncio
async def test_prepare_several_devices_and_requests(
    plugin: KubeletPlugin, claims: InMemoryClaimSource
) -> None:
    uid = "11111111-2222-3333-4444-555555555555"
    claims.put(
        allocated_claim(
            uid=uid,
            name="two-gpus",
            results=[
                {"request": "train", "driver": DRIVER, "pool": NODE, "device": "gpu-0"},
                {"request": "infer", "driver": DRIVER, "pool": NODE, "device": "gpu-3"},
            ],
        )
    )
    async with DraPluginClient(plugin.config.dra_socket) as dra:
        result = await dra.prepare([ClaimRef(namespace=NS, uid=uid, name="two-gpus")])
    assert result[uid] == PrepareResult(
        devices=(expected_device(uid, "gpu-0", "train"), expected_device(uid, "gpu-3", "infer"))
    )
    spec = json.loads((plugin.config.cdi_dir / f"k8s.gpu.nvidia.com-gpu_{uid}.json").read_text())
    assert spec["containerEdits"]["env"][0] == (
        f"NVIDIA_VISIBLE_DEVICES={gpu_uuid(NODE, 0)},{gpu_uuid(NODE, 3)}"
    )
    assert [d["name"] for d in spec["devices"]] == [f"{uid}-gpu-0", f"{uid}-gpu-3"]
    assert f"GPU_DEVICE_3_UUID={gpu_uuid(NODE, 3)}" in spec["devices"][1]["containerEdits"]["env"]


@pytest.mark.asyncio
async def test_prepare_is_idempotent(
    dra: DraPluginClient, plugin: KubeletPlugin, claims: InMemoryClaimSource
) -> None:
    first = await dra.prepare([ref(allocated_claim())])
    spec_file = plugin.config.cdi_dir / f"k8s.gpu.nvidia.com-gpu_{CLAIM_UID}.json"
    content = spec_file.read_bytes()
    second = await dra.prepare([ref(allocated_claim())])
    assert second == first
    assert spec_file.read_bytes() == content
    assert claims.reads == 1  # answered from the checkpoint
    spec_file.unlink()  # someone removed the spec: preparing again restores it
    assert await dra.prepare([ref(allocated_claim())]) == first
    assert spec_file.read_bytes() == content
    assert cdi_files(plugin.config) == [spec_file.name]


@pytest.mark.asyncio
async def test_unprepare_is_idempotent(dra: DraPluginClient, plugin: KubeletPlugin) -> None:
    claim_ref = ref(allocated_claim())
    await dra.prepare([claim_ref])
    assert await dra.unprepare([claim_ref]) == {CLAIM_UID: ""}
    assert await dra.unprepare([claim_ref]) == {CLAIM_UID: ""}
    never = ClaimRef(namespace=NS, uid="never-prepared", name="nope")
    assert await dra.unprepare([never]) == {"never-prepared": ""}
    assert cdi_files(plugin.config) == []


@pytest.mark.asyncio
async def test_claim_of_another_driver(
    dra: DraPluginClient, plugin: KubeletPlugin, claims: InMemoryClaimSource
) -> None:
    uid = "22222222-0000-0000-0000-000000000000"
    claims.put(
        allocated_claim(
            uid=uid,
            name="nic",
            results=[{"request": "nic", "driver": "net.example.com", "pool": NODE, "device": "eth-1"}],
        )
    )
    result = await dra.prepare([ClaimRef(namespace=NS, uid=uid, name="nic")])
    assert result == {uid: PrepareResult()}
    assert cdi_files(plugin.config) == []
    assert await dra.unprepare([ClaimRef(namespace=NS, uid=uid, name="nic")]) == {uid: ""}


@pytest.mark.asyncio
async def test_only_this_drivers_devices_on_this_node(
    plugin: KubeletPlugin, claims: InMemoryClaimSource
) -> None:
    uid = "33333333-0000-0000-0000-000000000000"
    claims.put(
        allocated_claim(
            uid=uid,
            name="mixed",
            results=[
                {"request": "nic", "driver": "net.example.com", "pool": NODE, "device": "eth-1"},
                {"request": "gpu", "driver": DRIVER, "pool": "gpu-node-2", "device": "gpu-0"},
                {"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-1"},
            ],
        )
    )
    async with DraPluginClient(plugin.config.dra_socket) as dra:
        result = await dra.prepare([ClaimRef(namespace=NS, uid=uid, name="mixed")])
    assert result == {uid: PrepareResult(devices=(expected_device(uid, "gpu-1"),))}


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("stored", "asked_uid", "message"),
    [
        (allocated_claim(allocated=False), CLAIM_UID, "is not allocated"),
        (None, CLAIM_UID, "not found"),
        (allocated_claim(), "99999999-0000-0000-0000-000000000000", "has UID " + CLAIM_UID),
        (
            allocated_claim(
                results=[{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "mystery"}]
            ),
            CLAIM_UID,
            "not a device of this driver",
        ),
    ],
)
async def test_refused_claims(config: PluginConfig, stored: Obj | None, asked_uid: str, message: str) -> None:
    source = InMemoryClaimSource([stored] if stored is not None else [])
    async with KubeletPlugin(config, source, stop_grace=1.0) as running:
        for version in ("v1.DRAPlugin", "v1beta1.DRAPlugin"):
            async with DraPluginClient(config.dra_socket, version) as dra:
                result = await dra.prepare([ClaimRef(namespace=NS, uid=asked_uid, name="job-a-0-gpu-x7k2p")])
            assert set(result) == {asked_uid}
            assert message in result[asked_uid].error
            assert result[asked_uid].devices == ()
        assert running.service.prepared == {}
    assert cdi_files(config) == []


@pytest.mark.asyncio
async def test_every_claim_gets_an_entry(plugin: KubeletPlugin, claims: InMemoryClaimSource) -> None:
    good = allocated_claim()
    pending = allocated_claim(uid="44444444-0000-0000-0000-000000000000", name="pending", allocated=False)
    claims.put(pending)
    unknown = ClaimRef(namespace=NS, uid="55555555-0000-0000-0000-000000000000", name="gone")
    async with DraPluginClient(plugin.config.dra_socket) as dra:
        result = await dra.prepare([ref(good), ref(pending), unknown])
        assert set(result) == {CLAIM_UID, ref(pending).uid, unknown.uid}
        assert result[CLAIM_UID] == PrepareResult(devices=(expected_device(),))
        assert "not allocated" in result[ref(pending).uid].error
        assert "not found" in result[unknown.uid].error
        # The refused claim is allocated later: the kubelet retries and it works.
        claims.put(allocated_claim(uid=ref(pending).uid, name="pending"))
        retry = await dra.prepare([ref(pending)])
        assert retry[ref(pending).uid] == PrepareResult(devices=(expected_device(ref(pending).uid),))


@pytest.mark.asyncio
@pytest.mark.parametrize("service", [DRA_V1_SERVICE, DRA_V1BETA1_SERVICE])
async def test_raw_calls_by_full_method_name(plugin: KubeletPlugin, service: str) -> None:
    """What the kubelet sends on the wire: /k8s.io.kubelet.pkg.apis.dra.<v>.DRAPlugin/..."""
    pb = dra_v1 if service == DRA_V1_SERVICE else dra_v1beta1
    async with grpc.aio.insecure_channel(f"unix://{plugin.config.dra_socket}") as channel:
        prepare = channel.unary_unary(
            f"/{service}/NodePrepareResources",
            request_serializer=pb.NodePrepareResourcesRequest.SerializeToString,
            response_deserializer=pb.NodePrepareResourcesResponse.FromString,
        )
        response = await prepare(
            pb.NodePrepareResourcesRequest(
                claims=[pb.Claim(namespace=NS, uid=CLAIM_UID, name="job-a-0-gpu-x7k2p")]
            ),
            timeout=10,
        )
        entry = response.claims[CLAIM_UID]
        assert entry.error == ""
        assert [
            (list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids)) for d in entry.devices
        ] == [(["gpu"], NODE, "gpu-0", [cdi_id(CLAIM_UID, "gpu-0")])]
        if pb is dra_v1:
            assert not entry.devices[0].HasField("share_id")
        unprepare = channel.unary_unary(
            f"/{service}/NodeUnprepareResources",
            request_serializer=pb.NodeUnprepareResourcesRequest.SerializeToString,
            response_deserializer=pb.NodeUnprepareResourcesResponse.FromString,
        )
        done = await unprepare(
            pb.NodeUnprepareResourcesRequest(
                claims=[pb.Claim(namespace=NS, uid=CLAIM_UID, name="job-a-0-gpu-x7k2p")]
            ),
            timeout=10,
        )
        assert dict(done.claims) == {CLAIM_UID: pb.NodeUnprepareResourceResponse()}
        missing = channel.unary_unary(
            f"/{service}/NoSuchMethod",
            request_serializer=pb.NodeUnprepareResourcesRequest.SerializeToString,
            response_deserializer=pb.NodeUnprepareResourcesResponse.FromString,
        )
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await missing(pb.NodeUnprepareResourcesRequest(), timeout=10)
        assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED


@pytest.mark.asyncio
async def test_share_id_is_passed_on_in_v1(plugin: KubeletPlugin, claims: InMemoryClaimSource) -> None:
    uid = "66666666-0000-0000-0000-000000000000"
    claims.put(
        allocated_claim(
            uid=uid,
            name="shared",
            results=[
                {
                    "request": "gpu",
                    "driver": DRIVER,
                    "pool": NODE,
                    "device": "gpu-0",
                    "shareID": "a1b2c3d4-0000-0000-0000-000000000000",
                }
            ],
        )
    )
    async with DraPluginClient(plugin.config.dra_socket, "v1.DRAPlugin") as dra:
        result = await dra.prepare([ClaimRef(namespace=NS, uid=uid, name="shared")])
    assert result[uid].devices[0].share_id == "a1b2c3d4-0000-0000-0000-000000000000"


@pytest.mark.asyncio
async def test_checkpoint_survives_a_restart(config: PluginConfig, claims: InMemoryClaimSource) -> None:
    claim_ref = ref(allocated_claim())
    async with KubeletPlugin(config, claims, stop_grace=1.0), DraPluginClient(config.dra_socket) as dra:
        first = await dra.prepare([claim_ref])
    checkpoint = json.loads(config.checkpoint_file.read_text())
    assert checkpoint["driverName"] == DRIVER
    assert checkpoint["nodeName"] == NODE
    assert set(checkpoint["claims"]) == {CLAIM_UID}
    empty = InMemoryClaimSource()  # the claim is no longer readable, e.g. the API is down
    async with KubeletPlugin(config, empty, stop_grace=1.0), DraPluginClient(config.dra_socket) as dra:
        assert await dra.prepare([claim_ref]) == first
        assert empty.reads == 0
        assert await dra.unprepare([claim_ref]) == {CLAIM_UID: ""}
    assert json.loads(config.checkpoint_file.read_text())["claims"] == {}
    assert cdi_files(config) == []


@pytest.mark.asyncio
async def test_corrupt_checkpoint_is_set_aside(config: PluginConfig, claims: InMemoryClaimSource) -> None:
    config.plugin_dir.mkdir(parents=True)
    config.checkpoint_file.write_text("{not json")
    async with KubeletPlugin(config, claims, stop_grace=1.0) as running:
        assert running.service.prepared == {}
    assert (config.plugin_dir / "checkpoint.json.bad").read_text() == "{not json"


@pytest.mark.asyncio
async def test_other_driver_name_and_dirs(short_dir: Path) -> None:
    config = PluginConfig(
        node_name=NODE,
        driver_name="gpu.example.com",
        registry_dir=short_dir / "r",
        plugins_dir=short_dir / "p",
        cdi_dir=short_dir / "c",
    )
    source = InMemoryClaimSource(
        [
            allocated_claim(
                results=[{"request": "gpu", "driver": "gpu.example.com", "pool": NODE, "device": "gpu-0"}]
            )
        ]
    )
    async with KubeletPlugin(config, source, stop_grace=1.0):
        registered = await register_plugin(short_dir / "r" / "gpu.example.com-reg.sock")
        assert registered.driver_name == "gpu.example.com"
        assert registered.endpoint == short_dir / "p" / "gpu.example.com" / "dra.sock"
        async with DraPluginClient(registered.endpoint) as dra:
            result = await dra.prepare([ref(allocated_claim())])
    assert result[CLAIM_UID].devices[0].cdi_device_ids == (f"k8s.gpu.example.com/gpu={CLAIM_UID}-gpu-0",)
    assert (short_dir / "c" / f"k8s.gpu.example.com-gpu_{CLAIM_UID}.json").is_file()


def test_socket_path_length_is_checked() -> None:
    with pytest.raises(ValueError, match="too long"):
        PluginConfig(node_name=NODE, registry_dir=Path("/tmp/" + "x" * 100))


# --- the fake kubelet as a node simulator uses it -------------------------------------------


@pytest.mark.asyncio
async def test_fake_kubelet_prepares_and_unprepares_claims(
    plugin: KubeletPlugin, kubelet: FakeKubelet, claims: InMemoryClaimSource
) -> None:
    await kubelet.scan()
    claim = allocated_claim()
    result = await kubelet.prepare_claims([claim])
    assert result == {CLAIM_UID: PrepareResult(devices=(expected_device(),))}
    assert await kubelet.unprepare_claims([CLAIM_UID]) == {CLAIM_UID: ""}
    assert cdi_files(plugin.config) == []


@pytest.mark.asyncio
async def test_fake_kubelet_unprepares_claims_it_did_not_prepare(
    plugin: KubeletPlugin, kubelet: FakeKubelet
) -> None:
    """E.g. after the simulator restarted: the UID goes to every registered plugin."""
    async with DraPluginClient(plugin.config.dra_socket) as dra:
        await dra.prepare([ref(allocated_claim())])
    assert cdi_files(plugin.config) != []
    await kubelet.scan()
    assert await kubelet.unprepare_claims([CLAIM_UID, "unknown-uid"]) == {CLAIM_UID: "", "unknown-uid": ""}
    assert cdi_files(plugin.config) == []
    assert plugin.service.prepared == {}


@pytest.mark.asyncio
async def test_fake_kubelet_reports_unregistered_and_unreachable_drivers(
    config: PluginConfig, claims: InMemoryClaimSource, kubelet: FakeKubelet
) -> None:
    claim = allocated_claim()
    result = await kubelet.prepare_claims([claim])
    assert result[CLAIM_UID].error == "DRA driver gpu.nvidia.com is not registered"
    async with KubeletPlugin(config, claims, stop_grace=1.0):
        await kubelet.scan()
    # Stopped, but the kubelet has not noticed yet: the call itself fails.
    result = await kubelet.prepare_claims([claim])
    assert "NodePrepareResources with DRA driver gpu.nvidia.com failed: UNAVAILABLE" in (
        result[CLAIM_UID].error
    )
    await kubelet.scan()
    assert kubelet.plugins == {}


@pytest.mark.asyncio
async def test_fake_kubelet_claim_without_drivers(kubelet: FakeKubelet) -> None:
    claim = allocated_claim(results=[])
    assert await kubelet.prepare_claims([claim]) == {CLAIM_UID: PrepareResult()}
    assert await kubelet.unprepare_claims([CLAIM_UID]) == {CLAIM_UID: ""}


def test_claim_drivers() -> None:
    claim = allocated_claim(
        results=[
            {"request": "a", "driver": DRIVER, "pool": NODE, "device": "gpu-0"},
            {"request": "b", "driver": "net.example.com", "pool": NODE, "device": "eth-0"},
            {"request": "c", "driver": DRIVER, "pool": NODE, "device": "gpu-1"},
        ]
    )
    assert claim_drivers(claim) == [DRIVER, "net.example.com"]
    assert claim_drivers(allocated_claim(allocated=False)) == []


def test_pod_claim_names() -> None:
    pod: Obj = {
        "spec": {
            "resourceClaims": [
                {"name": "gpu", "resourceClaimTemplateName": "single-gpu"},
                {"name": "shared", "resourceClaimName": "team-gpu"},
                {"name": "optional", "resourceClaimTemplateName": "maybe"},
            ]
        },
        "status": {},
    }
    waiting = pod_claim_names(pod)
    assert waiting.waiting_for
    pod["status"]["resourceClaimStatuses"] = [
        {"name": "gpu", "resourceClaimName": "job-a-0-gpu-x7k2p"},
        {"name": "optional"},  # the controller decided no claim is needed
    ]
    ready = pod_claim_names(pod)
    assert ready.waiting_for == ""
    assert ready.names == ("job-a-0-gpu-x7k2p", "team-gpu")
    assert pod_claim_names({"spec": {}}).names == ()


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
