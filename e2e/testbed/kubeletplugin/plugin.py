"""The kubelet plugin: a registration socket and a DRA socket, each served by grpc.aio.

Use as::

    async with KubeletPlugin(config, claim_source) as plugin:
        ...  # sockets exist and answer; plugin.registration tells what the kubelet said

The DRA socket is bound first and the registration socket last, so a kubelet
that sees the registration socket can reach the DRA service at once. Stopping
removes the registration socket first (which deregisters the plugin), then the
DRA socket. Stale socket files from an earlier run are removed before binding.
"""

from __future__ import annotations

import asyncio
import logging
import stat
from pathlib import Path
from types import TracebackType

import grpc
import grpc.aio

from e2e.testbed.kubeletplugin.claims import ClaimSource
from e2e.testbed.kubeletplugin.config import PluginConfig
from e2e.testbed.kubeletplugin.grpcapi import (
    RegistrationState,
    dra_v1_handler,
    dra_v1beta1_handler,
    registration_handler,
)
from e2e.testbed.kubeletplugin.service import DraNodeService

log = logging.getLogger(__name__)


class PluginError(Exception):
    """The plugin could not start (a socket could not be bound, a path is wrong)."""


def remove_stale_socket(path: Path) -> None:
    """Delete ``path`` if it is a socket or a leftover file; refuse directories (blocking)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        raise PluginError(f"{path} is a directory, expected a socket path")
    log.info("removing stale %s", path)
    path.unlink(missing_ok=True)


class KubeletPlugin:
    def __init__(self, config: PluginConfig, claims: ClaimSource, *, stop_grace: float = 5.0) -> None:
        self.config = config
        self.service = DraNodeService(config, claims)
        self.registration = RegistrationState()
        self._stop_grace = stop_grace
        self._dra_server: grpc.aio.Server | None = None
        self._reg_server: grpc.aio.Server | None = None

    async def __aenter__(self) -> KubeletPlugin:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        cfg = self.config
        await self.service.load()

        def _prepare_dirs() -> None:
            cfg.registry_dir.mkdir(parents=True, exist_ok=True)
            cfg.plugin_dir.mkdir(parents=True, exist_ok=True)
            remove_stale_socket(cfg.dra_socket)
            remove_stale_socket(cfg.registration_socket)

        await asyncio.to_thread(_prepare_dirs)
        try:
            self._dra_server = await self._serve(
                cfg.dra_socket, [dra_v1_handler(self.service), dra_v1beta1_handler(self.service)]
            )
            self._reg_server = await self._serve(
                cfg.registration_socket, [registration_handler(cfg, self.registration)]
            )
        except BaseException:
            await self.stop()
            raise
        log.info(
            "plugin %s for node %s: registration %s, DRA service %s",
            cfg.driver_name,
            cfg.node_name,
            cfg.registration_socket,
            cfg.dra_socket,
        )

    async def _serve(self, socket: Path, handlers: list[grpc.GenericRpcHandler]) -> grpc.aio.Server:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers(handlers)
        try:
            server.add_insecure_port(f"unix://{socket}")
        except RuntimeError as err:
            raise PluginError(f"cannot listen on {socket}: {err}") from err
        await server.start()
        return server

    async def stop(self) -> None:
        """Stop both servers and remove both sockets (safe to call twice)."""
        cfg = self.config
        reg, self._reg_server = self._reg_server, None
        dra, self._dra_server = self._dra_server, None
        if reg is not None:
            await reg.stop(self._stop_grace)
        await asyncio.to_thread(cfg.registration_socket.unlink, missing_ok=True)
        if dra is not None:
            await dra.stop(self._stop_grace)
        await asyncio.to_thread(cfg.dra_socket.unlink, missing_ok=True)
