"""A fake kubelet's side of DRA: plugin discovery, registration and Prepare/Unprepare calls.

For tests and for a node simulator that plays the kubelet::

    kubelet = FakeKubelet(registry_dir)
    await kubelet.scan()                       # register the plugins whose sockets exist
    outcome = await kubelet.prepare_claims(claims)   # claim objects read from the API
    ...
    await kubelet.unprepare_claims(uids)
    await kubelet.close()

It does what the kubelet does, minus inotify: it lists the registry directory
(``scan()``, or ``run()`` to rescan periodically) and registers each new socket
(GetInfo, version choice, NotifyRegistrationStatus: ``kubelet_registration``).
A socket that disappears deregisters its plugin. NodePrepareResources is sent
(``dra_client``) to the plugin of every driver that appears in a claim's
allocation, with a timeout like the kubelet's (45 s by default).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import grpc.aio

from e2e.testbed.kubeclient import Obj
from e2e.testbed.kubeletplugin.dra_client import DEFAULT_CALL_TIMEOUT, DraPluginClient
from e2e.testbed.kubeletplugin.grpcapi import PREPARE, UNPREPARE
from e2e.testbed.kubeletplugin.kubelet_registration import (
    KUBELET_DRA_VERSIONS,
    RegisteredPlugin,
    RegistrationError,
    register_plugin,
)
from e2e.testbed.kubeletplugin.model import ClaimRef, PrepareResult

log = logging.getLogger(__name__)


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
