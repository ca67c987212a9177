"""The kubelet's side of plugin registration: GetInfo, version choice, NotifyRegistrationStatus.

The kubelet finds a socket in its plugin registry directory, calls GetInfo on
it, picks the first DRA service version in the plugin's list that it supports,
and tells the plugin the outcome with NotifyRegistrationStatus.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import grpc.aio

from e2e.testbed.kubeletplugin.config import PLUGIN_TYPE_DRA
from e2e.testbed.kubeletplugin.grpcapi import REGISTRATION_SERVICE
from e2e.testbed.protos.gen.pluginregistration.v1 import api_pb2 as reg_v1

KUBELET_DRA_VERSIONS: tuple[str, ...] = ("v1.DRAPlugin", "v1beta1.DRAPlugin")


class RegistrationError(Exception):
    """A plugin socket did not register (unreachable, wrong type, no common version)."""


@dataclass(frozen=True)
class PluginInfo:
    type: str
    name: str
    endpoint: str
    supported_versions: tuple[str, ...]


@dataclass(frozen=True)
class RegisteredPlugin:
    driver_name: str
    registration_socket: Path
    endpoint: Path
    version: str  # the DRA service version chosen, e.g. "v1.DRAPlugin"


def unix_target(path: Path) -> str:
    """The gRPC target of a unix socket."""
    return f"unix://{path.absolute()}"


async def get_plugin_info(socket: Path, rpc_timeout: float = 10.0) -> PluginInfo:
    """Call Registration/GetInfo on a registration socket."""
    async with grpc.aio.insecure_channel(unix_target(socket)) as channel:
        call = channel.unary_unary(
            f"/{REGISTRATION_SERVICE}/GetInfo",
            request_serializer=reg_v1.InfoRequest.SerializeToString,
            response_deserializer=reg_v1.PluginInfo.FromString,
        )
        info = await call(reg_v1.InfoRequest(), timeout=rpc_timeout)
    return PluginInfo(
        type=info.type,
        name=info.name,
        endpoint=info.endpoint,
        supported_versions=tuple(info.supported_versions),
    )


async def notify_registration_status(
    socket: Path, registered: bool, error: str = "", rpc_timeout: float = 10.0
) -> None:
    async with grpc.aio.insecure_channel(unix_target(socket)) as channel:
        call = channel.unary_unary(
            f"/{REGISTRATION_SERVICE}/NotifyRegistrationStatus",
            request_serializer=reg_v1.RegistrationStatus.SerializeToString,
            response_deserializer=reg_v1.RegistrationStatusResponse.FromString,
        )
        await call(reg_v1.RegistrationStatus(plugin_registered=registered, error=error), timeout=rpc_timeout)


def choose_version(offered: Sequence[str], supported: Sequence[str]) -> str | None:
    """The first version in the plugin's list that the kubelet supports."""
    return next((v for v in offered if v in supported), None)


async def register_plugin(
    socket: Path, *, rpc_timeout: float = 10.0, supported: Sequence[str] = KUBELET_DRA_VERSIONS
) -> RegisteredPlugin:
    """The kubelet's registration handshake with one socket in the registry directory."""
    try:
        info = await get_plugin_info(socket, rpc_timeout)
    except grpc.aio.AioRpcError as err:
        raise RegistrationError(f"GetInfo on {socket}: {err.code().name}: {err.details()}") from err
    problem = ""
    version = choose_version(info.supported_versions, supported)
    if info.type != PLUGIN_TYPE_DRA:
        problem = f"plugin type {info.type!r} is not {PLUGIN_TYPE_DRA!r}"
    elif not info.name:
        problem = "plugin has no name"
    elif version is None:
        problem = (
            f"none of the versions {list(info.supported_versions)} of plugin "
            f"{info.name} is supported (kubelet supports {list(supported)})"
        )
    endpoint = Path(info.endpoint) if info.endpoint else socket
    if not problem and not endpoint.is_absolute():
        problem = f"endpoint {info.endpoint!r} is not an absolute path"
    try:
        await notify_registration_status(socket, not problem, problem, rpc_timeout)
    except grpc.aio.AioRpcError as err:
        problem = problem or f"NotifyRegistrationStatus: {err.code().name}: {err.details()}"
    if problem or version is None:
        raise RegistrationError(f"{socket}: {problem}")
    return RegisteredPlugin(
        driver_name=info.name, registration_socket=socket, endpoint=endpoint, version=version
    )
