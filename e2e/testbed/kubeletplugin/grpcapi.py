"""gRPC handlers: plugin registration, and the DRA service under its v1 and v1beta1 names.

Handlers are built with grpc's generic-handler API from the typed ``api_pb2``
messages (the generated ``*_pb2_grpc`` modules are not used: they are untyped).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

import grpc
import grpc.aio

from e2e.testbed.kubeletplugin.config import PLUGIN_TYPE_DRA, SUPPORTED_VERSIONS, PluginConfig
from e2e.testbed.kubeletplugin.model import ClaimRef, PreparedDevice, PrepareResult
from e2e.testbed.kubeletplugin.service import DraNodeService
from e2e.testbed.protos.gen.dra.v1 import api_pb2 as dra_v1
from e2e.testbed.protos.gen.dra.v1beta1 import api_pb2 as dra_v1beta1
from e2e.testbed.protos.gen.pluginregistration.v1 import api_pb2 as reg_v1

log = logging.getLogger(__name__)

REGISTRATION_SERVICE = "pluginregistration.Registration"
DRA_V1_SERVICE = "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin"
DRA_V1BETA1_SERVICE = "k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin"
PREPARE = "NodePrepareResources"
UNPREPARE = "NodeUnprepareResources"


@dataclass
class RegistrationState:
    """What the kubelet told us through NotifyRegistrationStatus."""

    info_calls: int = 0
    registered: bool | None = None  # None: never notified
    error: str = ""
    notifications: list[tuple[bool, str]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def wait_registered(self) -> None:
        """Wait until the kubelet reports a successful registration (wrap in a timeout)."""
        while not self.registered:
            self.changed.clear()
            await self.changed.wait()


def registration_handler(config: PluginConfig, state: RegistrationState) -> grpc.GenericRpcHandler:
    async def get_info(
        request: reg_v1.InfoRequest,
        context: grpc.aio.ServicerContext[reg_v1.InfoRequest, reg_v1.PluginInfo],
    ) -> reg_v1.PluginInfo:
        state.info_calls += 1
        return reg_v1.PluginInfo(
            type=PLUGIN_TYPE_DRA,
            name=config.driver_name,
            endpoint=config.endpoint,
            supported_versions=list(SUPPORTED_VERSIONS),
        )

    async def notify(
        request: reg_v1.RegistrationStatus,
        context: grpc.aio.ServicerContext[reg_v1.RegistrationStatus, reg_v1.RegistrationStatusResponse],
    ) -> reg_v1.RegistrationStatusResponse:
        state.registered = request.plugin_registered
        state.error = request.error
        state.notifications.append((request.plugin_registered, request.error))
        state.changed.set()
        if request.plugin_registered:
            log.info("kubelet registered plugin %s", config.driver_name)
        else:
            log.error("kubelet refused plugin %s: %s", config.driver_name, request.error)
        return reg_v1.RegistrationStatusResponse()

    return grpc.method_handlers_generic_handler(
        REGISTRATION_SERVICE,
        {
            "GetInfo": grpc.unary_unary_rpc_method_handler(
                get_info,
                request_deserializer=reg_v1.InfoRequest.FromString,
                response_serializer=reg_v1.PluginInfo.SerializeToString,
            ),
            "NotifyRegistrationStatus": grpc.unary_unary_rpc_method_handler(
                notify,
                request_deserializer=reg_v1.RegistrationStatus.FromString,
                response_serializer=reg_v1.RegistrationStatusResponse.SerializeToString,
            ),
        },
    )


class _ClaimMessage(Protocol):
    """The Claim message of either proto version."""

    @property
    def namespace(self) -> str: ...
    @property
    def uid(self) -> str: ...
    @property
    def name(self) -> str: ...


def _refs(claims: Iterable[_ClaimMessage]) -> list[ClaimRef]:
    return [ClaimRef(namespace=c.namespace, uid=c.uid, name=c.name) for c in claims]


def _v1_device(d: PreparedDevice) -> dra_v1.Device:
    device = dra_v1.Device(
        request_names=list(d.request_names),
        pool_name=d.pool_name,
        device_name=d.device_name,
        cdi_device_ids=list(d.cdi_device_ids),
    )
    if d.share_id is not None:
        device.share_id = d.share_id
    return device


def _v1beta1_device(d: PreparedDevice) -> dra_v1beta1.Device:
    return dra_v1beta1.Device(
        request_names=list(d.request_names),
        pool_name=d.pool_name,
        device_name=d.device_name,
        cdi_device_ids=list(d.cdi_device_ids),
    )


def _v1_prepare_response(results: dict[str, PrepareResult]) -> dra_v1.NodePrepareResourcesResponse:
    response = dra_v1.NodePrepareResourcesResponse()
    for uid, result in results.items():
        entry = response.claims[uid]
        if result.error:
            entry.error = result.error
        else:
            entry.devices.extend(_v1_device(d) for d in result.devices)
    return response


def _v1beta1_prepare_response(results: dict[str, PrepareResult]) -> dra_v1beta1.NodePrepareResourcesResponse:
    response = dra_v1beta1.NodePrepareResourcesResponse()
    for uid, result in results.items():
        entry = response.claims[uid]
        if result.error:
            entry.error = result.error
        else:
            entry.devices.extend(_v1beta1_device(d) for d in result.devices)
    return response


def dra_v1_handler(service: DraNodeService) -> grpc.GenericRpcHandler:
    async def prepare(
        request: dra_v1.NodePrepareResourcesRequest,
        context: grpc.aio.ServicerContext[
            dra_v1.NodePrepareResourcesRequest, dra_v1.NodePrepareResourcesResponse
        ],
    ) -> dra_v1.NodePrepareResourcesResponse:
        return _v1_prepare_response(await service.prepare(_refs(request.claims)))

    async def unprepare(
        request: dra_v1.NodeUnprepareResourcesRequest,
        context: grpc.aio.ServicerContext[
            dra_v1.NodeUnprepareResourcesRequest, dra_v1.NodeUnprepareResourcesResponse
        ],
    ) -> dra_v1.NodeUnprepareResourcesResponse:
        errors = await service.unprepare(_refs(request.claims))
        return dra_v1.NodeUnprepareResourcesResponse(
            claims={uid: dra_v1.NodeUnprepareResourceResponse(error=e) for uid, e in errors.items()}
        )

    return grpc.method_handlers_generic_handler(
        DRA_V1_SERVICE,
        {
            PREPARE: grpc.unary_unary_rpc_method_handler(
                prepare,
                request_deserializer=dra_v1.NodePrepareResourcesRequest.FromString,
                response_serializer=dra_v1.NodePrepareResourcesResponse.SerializeToString,
            ),
            UNPREPARE: grpc.unary_unary_rpc_method_handler(
                unprepare,
                request_deserializer=dra_v1.NodeUnprepareResourcesRequest.FromString,
                response_serializer=dra_v1.NodeUnprepareResourcesResponse.SerializeToString,
            ),
        },
    )


def dra_v1beta1_handler(service: DraNodeService) -> grpc.GenericRpcHandler:
    async def prepare(
        request: dra_v1beta1.NodePrepareResourcesRequest,
        context: grpc.aio.ServicerContext[
            dra_v1beta1.NodePrepareResourcesRequest, dra_v1beta1.NodePrepareResourcesResponse
        ],
    ) -> dra_v1beta1.NodePrepareResourcesResponse:
        return _v1beta1_prepare_response(await service.prepare(_refs(request.claims)))

    async def unprepare(
        request: dra_v1beta1.NodeUnprepareResourcesRequest,
        context: grpc.aio.ServicerContext[
            dra_v1beta1.NodeUnprepareResourcesRequest, dra_v1beta1.NodeUnprepareResourcesResponse
        ],
    ) -> dra_v1beta1.NodeUnprepareResourcesResponse:
        errors = await service.unprepare(_refs(request.claims))
        return dra_v1beta1.NodeUnprepareResourcesResponse(
            claims={uid: dra_v1beta1.NodeUnprepareResourceResponse(error=e) for uid, e in errors.items()}
        )

    return grpc.method_handlers_generic_handler(
        DRA_V1BETA1_SERVICE,
        {
            PREPARE: grpc.unary_unary_rpc_method_handler(
                prepare,
                request_deserializer=dra_v1beta1.NodePrepareResourcesRequest.FromString,
                response_serializer=dra_v1beta1.NodePrepareResourcesResponse.SerializeToString,
            ),
            UNPREPARE: grpc.unary_unary_rpc_method_handler(
                unprepare,
                request_deserializer=dra_v1beta1.NodeUnprepareResourcesRequest.FromString,
                response_serializer=dra_v1beta1.NodeUnprepareResourcesResponse.SerializeToString,
            ),
        },
    )
