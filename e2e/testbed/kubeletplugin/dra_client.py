"""The kubelet's gRPC client of one plugin's DRA socket (v1 or v1beta1 service)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import grpc.aio

from e2e.testbed.kubeletplugin.grpcapi import DRA_V1_SERVICE, DRA_V1BETA1_SERVICE, PREPARE, UNPREPARE
from e2e.testbed.kubeletplugin.kubelet_registration import unix_target
from e2e.testbed.kubeletplugin.model import ClaimRef, PreparedDevice, PrepareResult
from e2e.testbed.protos.gen.dra.v1 import api_pb2 as dra_v1
from e2e.testbed.protos.gen.dra.v1beta1 import api_pb2 as dra_v1beta1

DEFAULT_CALL_TIMEOUT = 45.0  # the kubelet's
_SERVICE_OF_VERSION = {"v1.DRAPlugin": DRA_V1_SERVICE, "v1beta1.DRAPlugin": DRA_V1BETA1_SERVICE}


def _device_of(d: dra_v1.Device | dra_v1beta1.Device) -> PreparedDevice:
    share_id = d.share_id if isinstance(d, dra_v1.Device) and d.HasField("share_id") else None
    return PreparedDevice(
        request_names=tuple(d.request_names),
        pool_name=d.pool_name,
        device_name=d.device_name,
        cdi_device_ids=tuple(d.cdi_device_ids),
        share_id=share_id,
    )


class DraPluginClient:
    """NodePrepareResources/NodeUnprepareResources on one plugin's DRA socket."""

    def __init__(
        self, endpoint: Path, version: str = "v1.DRAPlugin", timeout: float = DEFAULT_CALL_TIMEOUT
    ) -> None:
        if version not in _SERVICE_OF_VERSION:
            raise ValueError(f"unknown DRA service version {version!r}")
        self.endpoint = endpoint
        self.version = version
        self.timeout = timeout
        self._channel = grpc.aio.insecure_channel(unix_target(endpoint))

    async def __aenter__(self) -> DraPluginClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._channel.close()

    def _method(self, name: str) -> str:
        return f"/{_SERVICE_OF_VERSION[self.version]}/{name}"

    async def prepare(self, claims: Sequence[ClaimRef]) -> dict[str, PrepareResult]:
        """Claim UID -> result, as the plugin answered (raises grpc.aio.AioRpcError)."""
        if self.version == "v1.DRAPlugin":
            call = self._channel.unary_unary(
                self._method(PREPARE),
                request_serializer=dra_v1.NodePrepareResourcesRequest.SerializeToString,
                response_deserializer=dra_v1.NodePrepareResourcesResponse.FromString,
            )
            response = await call(
                dra_v1.NodePrepareResourcesRequest(
                    claims=[dra_v1.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
                ),
                timeout=self.timeout,
            )
            return {
                uid: PrepareResult(devices=tuple(_device_of(d) for d in r.devices), error=r.error)
                for uid, r in response.claims.items()
            }
        beta_call = self._channel.unary_unary(
            self._method(PREPARE),
            request_serializer=dra_v1beta1.NodePrepareResourcesRequest.SerializeToString,
            response_deserializer=dra_v1beta1.NodePrepareResourcesResponse.FromString,
        )
        beta = await beta_call(
            dra_v1beta1.NodePrepareResourcesRequest(
                claims=[dra_v1beta1.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
            ),
            timeout=self.timeout,
        )
        return {
            uid: PrepareResult(devices=tuple(_device_of(d) for d in r.devices), error=r.error)
            for uid, r in beta.claims.items()
        }

    async def unprepare(self, claims: Sequence[ClaimRef]) -> dict[str, str]:
        """Claim UID -> error ("" for success) (raises grpc.aio.AioRpcError)."""
        if self.version == "v1.DRAPlugin":
            call = self._channel.unary_unary(
                self._method(UNPREPARE),
                request_serializer=dra_v1.NodeUnprepareResourcesRequest.SerializeToString,
                response_deserializer=dra_v1.NodeUnprepareResourcesResponse.FromString,
            )
            response = await call(
                dra_v1.NodeUnprepareResourcesRequest(
                    claims=[dra_v1.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
                ),
                timeout=self.timeout,
            )
            return {uid: r.error for uid, r in response.claims.items()}
        beta_call = self._channel.unary_unary(
            self._method(UNPREPARE),
            request_serializer=dra_v1beta1.NodeUnprepareResourcesRequest.SerializeToString,
            response_deserializer=dra_v1beta1.NodeUnprepareResourcesResponse.FromString,
        )
        beta = await beta_call(
            dra_v1beta1.NodeUnprepareResourcesRequest(
                claims=[dra_v1beta1.Claim(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]
            ),
            timeout=self.timeout,
        )
        return {uid: r.error for uid, r in beta.claims.items()}
