"""The DRA side of the simulated kubelets: one :class:`FakeKubelet` per simulated node.

Each node's fake kubelet watches the node's plugin registry directory (a scan
every second, instead of inotify), registers the driver plugins it finds, and
calls NodePrepareResources / NodeUnprepareResources on their DRA sockets for
the pod simulator. Claims shared by several pods of a node are unprepared when
the last of those pods ends, as the kubelet does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from pathlib import Path

import grpc

from e2e.testbed.kubeclient import Obj
from e2e.testbed.kubeletplugin.kubelet import FakeKubelet

log = logging.getLogger(__name__)
SCAN_INTERVAL = 1.0
# The kubelet waits up to 45s for a plugin; the simulator retries sooner.
CALL_TIMEOUT = 20.0


class KubeletSimulator:
    def __init__(
        self,
        registry_dirs: dict[str, Path],
        on_plugins_changed: Callable[[str], None] = lambda _node: None,
        *,
        scan_interval: float = SCAN_INTERVAL,
        call_timeout: float = CALL_TIMEOUT,
    ) -> None:
        self._kubelets = {
            node: FakeKubelet(path, call_timeout=call_timeout, registration_timeout=5.0)
            for node, path in registry_dirs.items()
        }
        self._on_plugins_changed = on_plugins_changed
        self._scan_interval = scan_interval
        # node -> claim UID -> UIDs of the pods on that node using the prepared claim
        self._users: dict[str, dict[str, set[str]]] = {node: {} for node in registry_dirs}
        # One prepare/unprepare at a time per node: a release must not unprepare a
        # shared claim while another pod is preparing it.
        self._locks = {node: asyncio.Lock() for node in registry_dirs}

    def nodes(self) -> list[str]:
        return list(self._kubelets)

    def registered(self, node: str) -> list[str]:
        """Driver names registered on ``node``."""
        return sorted(self._kubelets[node].plugins)

    async def scan_all(self) -> None:
        for node, kubelet in self._kubelets.items():
            before = set(kubelet.plugins)
            try:
                await kubelet.scan()
            except (OSError, grpc.RpcError) as err:
                log.warning("node %s: scanning %s failed: %s", node, kubelet.registry_dir, err)
            except Exception:  # the watcher must outlive one odd socket
                log.exception("node %s: scanning %s failed", node, kubelet.registry_dir)
            if set(kubelet.plugins) != before:
                self._on_plugins_changed(node)

    async def run(self) -> None:
        """Rescan every node's registry until cancelled; closes the gRPC channels on the way out."""
        try:
            while True:
                await self.scan_all()
                await asyncio.sleep(self._scan_interval)
        finally:
            for kubelet in self._kubelets.values():
                await kubelet.close()

    async def prepare(self, node: str, pod_uid: str, claims: list[Obj]) -> str | None:
        """NodePrepareResources for the pod's claims; None when all are prepared, else the
        error as the kubelet words it (naming the claim)."""
        async with self._locks[node]:
            return await self._prepare(node, pod_uid, claims)

    async def _prepare(self, node: str, pod_uid: str, claims: list[Obj]) -> str | None:
        results = await self._kubelets[node].prepare_claims(claims)
        errors = []
        users = self._users[node]
        for claim in claims:
            meta = claim["metadata"]
            result = results.get(meta["uid"])
            if result is not None and not result.error:
                users.setdefault(meta["uid"], set()).add(pod_uid)
                continue
            detail = result.error if result is not None else "no result"
            errors.append(
                f"NodePrepareResources failed for ResourceClaim {meta['namespace']}/{meta['name']}: {detail}"
            )
        if errors:
            return "prepare dynamic resources: " + "; ".join(errors)
        return None

    def adopt(self, node: str, pod_uid: str, claim_uids: Iterable[str]) -> None:
        """Count a pod found running (e.g. after a restart) as a user of its claims."""
        for uid in claim_uids:
            self._users[node].setdefault(uid, set()).add(pod_uid)

    async def release(self, node: str, pod_uid: str) -> str | None:
        """The pod ended: NodeUnprepareResources for the claims no other pod here uses.

        None when done; else the error (the pod stays a user, so a retry works)."""
        async with self._locks[node]:
            return await self._release(node, pod_uid)

    async def _release(self, node: str, pod_uid: str) -> str | None:
        users = self._users[node]
        mine = [uid for uid, pods in users.items() if pod_uid in pods]
        last = [uid for uid in mine if users[uid] == {pod_uid}]
        for uid in mine:
            if uid not in last:
                users[uid].discard(pod_uid)
        if not last:
            return None
        errors = await self._kubelets[node].unprepare_claims(last)
        failed = []
        for uid in last:
            error = errors.get(uid, "")
            if error:
                failed.append(f"NodeUnprepareResources failed for ResourceClaim {uid}: {error}")
            else:
                users.pop(uid, None)
        return "unprepare dynamic resources: " + "; ".join(failed) if failed else None
