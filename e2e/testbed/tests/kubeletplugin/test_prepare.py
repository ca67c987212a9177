"""NodePrepareResources / NodeUnprepareResources on the plugin's DRA socket (v1 and v1beta1): CDI
specs, idempotence, refused claims, raw calls by method name, share IDs, the checkpoint."""

from __future__ import annotations

import json

import grpc
import grpc.aio
import pytest

from e2e.testbed.fakedriver import gpu_devices, gpu_uuid
from e2e.testbed.kubeclient import Obj
from e2e.testbed.kubeletplugin import (
    ClaimRef,
    DraPluginClient,
    InMemoryClaimSource,
    KubeletPlugin,
    PluginConfig,
    PrepareResult,
)
from e2e.testbed.kubeletplugin.grpcapi import DRA_V1_SERVICE, DRA_V1BETA1_SERVICE
from e2e.testbed.protos.gen.dra.v1 import api_pb2 as dra_v1
from e2e.testbed.protos.gen.dra.v1beta1 import api_pb2 as dra_v1beta1
from e2e.testbed.spec import default_spec
from e2e.testbed.tests.allocated_claims import (
    CLAIM_UID,
    DRIVER,
    NODE,
    NS,
    T4_UUID,
    allocated_claim,
    cdi_files,
    cdi_id,
    expected_device,
    ref,
)

pytestmark = pytest.mark.timeout(60)


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
