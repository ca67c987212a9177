"""Moves pods bound to simulated nodes through their lifecycle, like a kubelet would.

One asyncio task per live pod drives it: wait until its ResourceClaims are
allocated and reserved for it, then Running with containers Ready, then
Succeeded (or Failed) after its run time. Annotations (see names.py) make a pod
stall, fail, or run for a given time. A pod being deleted is terminated and
then deleted with grace period 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass, field

import aiohttp

from e2e.testbed.informer import Informer
from e2e.testbed.kubeclient import STRATEGIC_MERGE_PATCH, ApiError, KubeClient, Obj, api_path
from e2e.testbed.podstatus import (
    TERMINAL_PHASES,
    claims_blocking,
    finished_patch,
    run_seconds,
    running_patch,
    stalled_patch,
    wants_failure,
    wants_stall,
)
from e2e.testbed.timeutil import parse_time

log = logging.getLogger(__name__)
CLAIM_RECHECK_SECONDS = 5.0


def _resource_version(obj: Obj) -> int:
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, ValueError):
        return 0


@dataclass
class _PodState:
    pod: Obj
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    gone: bool = False
    waiting_reason: str | None = None
    stalled: bool = False

    def update(self, pod: Obj) -> None:
        """Keep the newest version (a watch event may be older than a patch answer)."""
        if _resource_version(pod) >= _resource_version(self.pod):
            self.pod = pod
        self.wake.set()


class PodSimulator:
    def __init__(self, kube: KubeClient, node_ips: dict[str, str], default_run_seconds: float) -> None:
        self._kube = kube
        self._node_ips = node_ips
        self._default_run_seconds = default_run_seconds
        self._pods: dict[str, _PodState] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._ip_counters: dict[str, int] = {}
        self._deleted: set[str] = set()  # uids we already deleted (waiting for finalizers)
        self._pod_informer = Informer(
            kube,
            api_path("v1", "pods"),
            self._on_pod,
            name="pods",
            params={"fieldSelector": "spec.nodeName!="},
        )
        self._claim_informer = Informer(
            kube,
            api_path("resource.k8s.io/v1", "resourceclaims"),
            self._on_claim,
            name="resourceclaims",
        )

    async def wait_synced(self) -> None:
        await self._claim_informer.synced.wait()
        await self._pod_informer.synced.wait()

    async def run(self) -> None:
        """Run until cancelled; cancels every pod task on the way out."""
        loops = [
            asyncio.create_task(self._claim_informer.run(), name="claim-informer"),
            asyncio.create_task(self._pod_informer.run(), name="pod-informer"),
            asyncio.create_task(self._recheck_waiting(), name="claim-recheck"),
        ]
        try:
            done, _ = await asyncio.wait(loops, return_when=asyncio.FIRST_EXCEPTION)
            for task in done:
                task.result()  # re-raise an unexpected crash
        finally:
            pending = loops + list(self._tasks.values())
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    # ---- informer callbacks (must not block) ---------------------------------
    async def _on_claim(self, _kind: str, _claim: Obj) -> None:
        self._wake_waiting()

    async def _on_pod(self, kind: str, pod: Obj) -> None:
        if pod.get("spec", {}).get("nodeName") not in self._node_ips:
            return
        uid = pod["metadata"]["uid"]
        state = self._pods.get(uid)
        if kind == "DELETED":
            self._deleted.discard(uid)
            if state is not None:
                state.gone = True
                state.wake.set()
            return
        if state is not None:
            state.update(pod)
            return
        terminal = pod.get("status", {}).get("phase") in TERMINAL_PHASES
        deleting = bool(pod["metadata"].get("deletionTimestamp"))
        if (terminal and not deleting) or uid in self._deleted:
            return
        state = _PodState(pod)
        self._pods[uid] = state
        self._tasks[uid] = asyncio.create_task(self._drive(uid, state), name=f"pod-{pod['metadata']['name']}")

    def _wake_waiting(self) -> None:
        for state in self._pods.values():
            if state.waiting_reason is not None:
                state.wake.set()

    async def _recheck_waiting(self) -> None:
        while True:
            await asyncio.sleep(CLAIM_RECHECK_SECONDS)
            self._wake_waiting()

    # ---- one pod ---------------------------------------------------------------
    async def _drive(self, uid: str, state: _PodState) -> None:
        try:
            while not state.gone:
                state.wake.clear()
                try:
                    sleep_for = await self._step(state)
                except ApiError as err:
                    if err.status == 404:
                        return
                    log.warning("pod %s: %s", _name(state.pod), err)
                    sleep_for = 0.5 if err.status == 409 else 1.0
                    await self._refresh(state)
                except (aiohttp.ClientError, OSError, TimeoutError) as err:
                    log.warning("pod %s: %s", _name(state.pod), err)
                    sleep_for = 1.0
                except Exception:
                    # A bug or an unexpected object must not end this pod's task quietly.
                    log.exception("pod %s: unexpected error", _name(state.pod))
                    sleep_for = 5.0
                if sleep_for is None:
                    return
                if sleep_for > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(
                            state.wake.wait(), None if math.isinf(sleep_for) else sleep_for
                        )
        finally:
            self._pods.pop(uid, None)
            self._tasks.pop(uid, None)

    async def _step(self, state: _PodState) -> float | None:
        """Do the next thing for this pod; return how long to wait (None: done)."""
        pod = state.pod
        meta = pod["metadata"]
        phase = pod.get("status", {}).get("phase", "Pending")
        if meta.get("deletionTimestamp"):
            await self._terminate(state)
            return None
        if phase in TERMINAL_PHASES:
            return None
        if phase == "Pending":
            if state.stalled:
                return math.inf
            blocker = claims_blocking(pod, self._claim_informer.cache)
            state.waiting_reason = blocker
            if blocker is not None:
                log.debug("pod %s waits: %s", _name(pod), blocker)
                return CLAIM_RECHECK_SECONDS
            node = pod["spec"]["nodeName"]
            if wants_stall(pod):
                await self._patch_status(state, stalled_patch(pod, self._node_ips[node], self._pod_ip(node)))
                state.stalled = True
                log.info("pod %s stalled on purpose", _name(pod))
                return math.inf
            await self._patch_status(state, running_patch(pod, self._node_ips[node], self._pod_ip(node)))
            log.info("pod %s running on %s", _name(pod), node)
            return 0
        # Running: finish when the run time is over.
        duration = run_seconds(pod, self._default_run_seconds)
        if math.isinf(duration):
            return math.inf
        started = pod.get("status", {}).get("startTime")
        elapsed = time.time() - parse_time(started).timestamp() if started else duration
        if elapsed < duration:
            return duration - elapsed
        exit_code = 1 if wants_failure(pod) else 0
        await self._patch_status(state, finished_patch(pod, exit_code))
        log.info("pod %s finished with exit code %d", _name(pod), exit_code)
        return None

    async def _terminate(self, state: _PodState) -> None:
        pod = state.pod
        meta = pod["metadata"]
        if pod.get("status", {}).get("phase") not in TERMINAL_PHASES:
            await self._patch_status(state, finished_patch(state.pod, 137, "Error"))
        path = api_path("v1", "pods", meta["namespace"], meta["name"])
        await self._kube.delete(
            path,
            body={
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "gracePeriodSeconds": 0,
                "preconditions": {"uid": meta["uid"]},
            },
        )
        self._deleted.add(meta["uid"])
        log.info("pod %s deleted", _name(pod))

    async def _patch_status(self, state: _PodState, patch: Obj) -> None:
        meta = state.pod["metadata"]
        path = api_path("v1", "pods", meta["namespace"], meta["name"], "status")
        state.update(await self._kube.patch(path, patch, STRATEGIC_MERGE_PATCH))

    async def _refresh(self, state: _PodState) -> None:
        meta = state.pod["metadata"]
        with contextlib.suppress(ApiError, aiohttp.ClientError, OSError, TimeoutError):
            fresh = await self._kube.get_or_none(api_path("v1", "pods", meta["namespace"], meta["name"]))
            if fresh is None or fresh["metadata"]["uid"] != meta["uid"]:
                state.gone = True
            else:
                state.update(fresh)

    def _pod_ip(self, node: str) -> str:
        index = list(self._node_ips).index(node)
        count = self._ip_counters.get(node, 0)
        self._ip_counters[node] = count + 1
        return f"10.244.{index % 256}.{count % 250 + 2}"


def _name(pod: Obj) -> str:
    meta = pod.get("metadata", {})
    return f"{meta.get('namespace')}/{meta.get('name')}"
