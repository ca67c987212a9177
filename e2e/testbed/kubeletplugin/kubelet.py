"""A fake kubelet's side of DRA: plugin discovery, registration and Prepare/Unprepare calls.

For tests and for a node simulator that plays the kubelet::

    kubelet = FakeKubelet(registry_dir)
    await kubelet.scan()                       # register the plugins whose sockets exist
    outcome = await kubelet.prepare_claims(claims)   # claim objects read from the API
    ...
    await kubelet.unprepare_claims(uids)
    await kubelet.close()

It does what the kubelet does, minus inotify: it lists the registry directory
(``scan()``, or ``run()`` to rescan periodically), calls GetInfo on each new
socket, picks the first DRA service version in the plugin's list that it
supports, and tells the plugin the outcome with NotifyRegistrationStatus.
A socket that disappears deregisters its plugin. NodePrepareResources is sent
to the plugin of every driver that appears in a claim's allocation, with a
timeout like the kubelet's (45 s by default).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import grpc
import grpc.aio

from e2e.testbed.kubeclient import Obj
from e2e.testbed.kubeletplugin.config import PLUGIN_TYPE_DRA
from e2e.testbed.kubeletplugin.grpcapi import (
    DRA_V1_SERVICE,
    DRA_V1BETA1_SERVICE,
    PREPARE,
    REGISTRATION_SERVICE,
    UNPREPARE,
)
from e2e.testbed.kubeletplugin.model import ClaimRef, PreparedDevice, PrepareResult
from e2e.testbed.protos.gen.dra.v1 import api_pb2 as dra_v1
from e2e.testbed.protos.gen.dra.v1beta1 import api_pb2 as dra_v1beta1
from e2e.testbed.protos.gen.pluginregistration.v1 import api_pb2 as reg_v1

log = logging.getLogger(__name__)

KUBELET_DRA_VERSIONS: tuple[str, ...] = ("v1.DRAPlugin", "v1beta1.DRAPlugin")
DEFAULT_CALL_TIMEOUT = 45.0
_SERVICE_OF_VERSION = {"v1.DRAPlugin": DRA_V1_SERVICE, "v1beta1.DRAPlugin": DRA_V1BETA1_SERVICE}


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


def _unix_target(path: Path) -> str:
    return f"unix://{path.absolute()}"


async def get_plugin_info(socket: Path, rpc_timeout: float = 10.0) -> PluginInfo:
    """Call Registration/GetInfo on a registration socket."""
    async with grpc.aio.insecure_channel(_unix_target(socket)) as channel:
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
    async with grpc.aio.insecure_channel(_unix_target(socket)) as channel:
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
        self._channel = grpc.aio.insecure_channel(_unix_target(endpoint))

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


def claim_ref(claim: Obj) -> ClaimRef:
    meta = claim["metadata"]
    return ClaimRef(namespace=meta["namespace"], uid=meta["uid"], name=meta["name"])


def claim_drivers(claim: Obj) -> list[str]:
    """Drivers in the claim's allocation, in order of first appearance."""
    allocation = (claim.get("status") or {}).get("allocation") or {}
    results = (allocation.get("devices") or {}).get("results") or []
    return list(dict.fromkeys(r["driver"] for r in results if r.get("driver")))


@dataclass(frozen=True)
class PodClaims:
    """The ResourceClaims a pod uses, by claim name, as the kubelet works them out."""

    names: tuple[str, ...]
    # Non-empty: the pod cannot start yet (e.g. its generated claim is not recorded).
    waiting_for: str = ""


def pod_claim_names(pod: Obj) -> PodClaims:
    """``spec.resourceClaims`` resolved: direct names, or names from ``status.resourceClaimStatuses``.

    A template entry with a null name in the status needs no claim (skipped);
    one that has no status entry yet means the claim is not created yet.
    """
    statuses = {
        s["name"]: s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    names: list[str] = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        if entry.get("resourceClaimName"):
            names.append(entry["resourceClaimName"])
        elif entry["name"] not in statuses:
            return PodClaims(
                names=tuple(names), waiting_for=f"claim for pod entry {entry['name']!r} not created yet"
            )
        elif statuses[entry["name"]]:
            names.append(str(statuses[entry["name"]]))
    return PodClaims(names=tuple(dict.fromkeys(names)))


@dataclass
class _Prepared:
    ref: ClaimRef
    drivers: tuple[str, ...]


@dataclass
class FakeKubelet:
    """Plugin registry and DRA client of one simulated node."""

    registry_dir: Path
    supported_versions: tuple[str, ...] = KUBELET_DRA_VERSIONS
    call_timeout: float = DEFAULT_CALL_TIMEOUT
    registration_timeout: float = 10.0
    plugins: dict[str, RegisteredPlugin] = field(default_factory=dict)
    # Registration sockets that failed, with the reason (retried on each scan).
    failures: dict[Path, str] = field(default_factory=dict)
    _clients: dict[str, DraPluginClient] = field(default_factory=dict)
    _prepared: dict[str, _Prepared] = field(default_factory=dict)

    async def scan(self) -> None:
        """Register plugins whose sockets appeared; drop those whose sockets are gone."""
        sockets = await asyncio.to_thread(self._list_sockets)
        for name, plugin in list(self.plugins.items()):
            if plugin.registration_socket not in sockets:
                log.info("plugin %s deregistered (socket %s gone)", name, plugin.registration_socket)
                await self._forget(name)
        known = {p.registration_socket for p in self.plugins.values()}
        self.failures = {s: why for s, why in self.failures.items() if s in sockets}
        for socket in sorted(sockets - known):
            try:
                plugin = await register_plugin(
                    socket, rpc_timeout=self.registration_timeout, supported=self.supported_versions
                )
            except RegistrationError as err:
                if self.failures.get(socket) != str(err):
                    log.warning("plugin registration failed: %s", err)
                self.failures[socket] = str(err)
                continue
            self.failures.pop(socket, None)
            if plugin.driver_name in self.plugins:
                await self._forget(plugin.driver_name)  # re-registered on a new socket
            self.plugins[plugin.driver_name] = plugin
            log.info(
                "registered DRA plugin %s (%s at %s)", plugin.driver_name, plugin.version, plugin.endpoint
            )

    def _list_sockets(self) -> set[Path]:
        if not self.registry_dir.is_dir():
            return set()
        return {
            p.absolute() for p in self.registry_dir.iterdir() if not p.name.startswith(".") and p.is_socket()
        }

    async def run(self, interval: float = 1.0) -> None:
        """Rescan forever (cancel to stop)."""
        while True:
            try:
                await self.scan()
            except OSError as err:
                log.warning("scanning %s failed: %s", self.registry_dir, err)
            await asyncio.sleep(interval)

    async def _forget(self, driver: str) -> None:
        self.plugins.pop(driver, None)
        client = self._clients.pop(driver, None)
        if client is not None:
            await client.close()

    def client(self, driver: str) -> DraPluginClient | None:
        """A (cached) client for a registered driver; None if it is not registered."""
        plugin = self.plugins.get(driver)
        if plugin is None:
            return None
        client = self._clients.get(driver)
        if client is None:
            client = DraPluginClient(plugin.endpoint, plugin.version, self.call_timeout)
            self._clients[driver] = client
        return client

    async def prepare_claims(self, claims: Sequence[Obj]) -> dict[str, PrepareResult]:
        """NodePrepareResources for allocated claim objects, grouped by driver.

        Returns a result per claim UID: the devices of all its drivers, or the
        first error (unregistered driver, RPC failure, or the plugin's own).
        """
        by_driver: dict[str, list[ClaimRef]] = {}
        results: dict[str, PrepareResult] = {}
        for claim in claims:
            ref = claim_ref(claim)
            drivers = claim_drivers(claim)
            self._prepared[ref.uid] = _Prepared(ref, tuple(drivers))
            results[ref.uid] = PrepareResult()
            for driver in drivers:
                by_driver.setdefault(driver, []).append(ref)
        for driver, refs in by_driver.items():
            answers = await self._call(driver, refs, prepare=True)
            for ref in refs:
                answer = answers.get(ref.uid)
                current = results[ref.uid]
                if current.error:
                    continue
                if isinstance(answer, str):
                    results[ref.uid] = PrepareResult(error=answer)
                elif answer is None:
                    results[ref.uid] = PrepareResult(
                        error=f"driver {driver} returned no result for claim {ref.uid}"
                    )
                elif answer.error:
                    results[ref.uid] = PrepareResult(error=answer.error)
                else:
                    results[ref.uid] = PrepareResult(devices=current.devices + answer.devices)
        return results

    async def unprepare_claims(self, uids: Iterable[str]) -> dict[str, str]:
        """NodeUnprepareResources for claims prepared through ``prepare_claims``.

        Claim UID -> error ("" when done); a claim unprepared without error is
        forgotten. A UID this object did not prepare (e.g. prepared before a
        restart of the simulator) is sent to every registered plugin, with
        empty namespace and name: unprepare is idempotent, and plugins that
        never prepared it answer with no error.
        """
        by_driver: dict[str, list[ClaimRef]] = {}
        errors: dict[str, str] = {}
        for uid in uids:
            errors[uid] = ""
            known = self._prepared.get(uid)
            if known is None:
                known = _Prepared(ClaimRef(namespace="", uid=uid, name=""), tuple(self.plugins))
            for driver in known.drivers:
                by_driver.setdefault(driver, []).append(known.ref)
        for driver, refs in by_driver.items():
            answers = await self._call(driver, refs, prepare=False)
            for ref in refs:
                answer = answers.get(ref.uid)
                if answer is None:
                    answer = f"driver {driver} returned no result for claim {ref.uid}"
                if not isinstance(answer, str):
                    continue
                errors[ref.uid] = errors[ref.uid] or answer
        for uid, error in errors.items():
            if not error:
                self._prepared.pop(uid, None)
        return errors

    async def _call(self, driver: str, refs: list[ClaimRef], prepare: bool) -> dict[str, PrepareResult | str]:
        op = PREPARE if prepare else UNPREPARE
        client = self.client(driver)
        if client is None:
            msg = f"DRA driver {driver} is not registered"
            return {r.uid: msg for r in refs}
        try:
            if prepare:
                return dict(await client.prepare(refs))
            return dict(await client.unprepare(refs))
        except grpc.aio.AioRpcError as err:
            msg = f"{op} with DRA driver {driver} failed: {err.code().name}: {err.details()}"
            return {r.uid: msg for r in refs}

    async def close(self) -> None:
        for driver in list(self._clients):
            client = self._clients.pop(driver)
            await client.close()
