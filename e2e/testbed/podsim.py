"""Moves pods bound to simulated nodes through their lifecycle, like a kubelet would.

One asyncio task per live pod drives it: wait until its ResourceClaims are
allocated and reserved for it, have the node's DRA drivers prepare them
(NodePrepareResources through each driver's kubelet-plugin socket, when a
:class:`KubeletSimulator` is given), then Running with containers Ready, then
Succeeded (or Failed) after its run time, then NodeUnprepareResources.
Annotations (see names.py) make a pod stall, fail, or run for a given time. A
pod being deleted is terminated and then deleted with grace period 0.

A failed prepare leaves the pod as a kubelet does: Pending, containers waiting
in ContainerCreating, a Warning Event ``FailedPrepareDynamicResources`` (its
count bumped on each retry); the error is also in the pod's
PodReadyToStartContainers condition and the containers' waiting message.
Prepare is retried with exponential backoff (0.5 s .. 8 s) and at once when a
plugin (re)registers on the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import aiohttp

from e2e.testbed.events import EventRecorder
from e2e.testbed.informer import Informer
from e2e.testbed.kubeclient import STRATEGIC_MERGE_PATCH, ApiError, KubeClient, Obj, api_path
from e2e.testbed.podstatus import (
    PREPARE_FAILED_REASON,
    TERMINAL_PHASES,
    claims_blocking,
    finished_patch,
    pod_claims,
    prepare_failed_patch,
    run_seconds,
    running_patch,
    stalled_patch,
    wants_failure,
    wants_stall,
)
from e2e.testbed.timeutil import parse_time

if TYPE_CHECKING:
    from e2e.testbed.kubeletsim import KubeletSimulator

log = logging.getLogger(__name__)
CLAIM_RECHECK_SECONDS = 5.0
PREPARE_BACKOFF_FIRST = 0.5
PREPARE_BACKOFF_MAX = 8.0
UNPREPARE_BACKOFF_MAX = 10.0


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
    # DRA: claims prepared on the node; failed attempts; no new attempt before retry_at
    # (monotonic); the prepare error last written to the pod's status.
    prepared: bool = False
    prepare_failures: int = 0
    retry_at: float = 0.0
    prepare_error: str | None = None

    def update(self, pod: Obj) -> None:
        """Keep the newest version (a watch event may be older than a patch answer)."""
        if _resource_version(pod) >= _resource_version(self.pod):
            self.pod = pod
        self.wake.set()


class PodSimulator:
    def __init__(
        self,
        kube: KubeClient,
        node_ips: dict[str, str],
        default_run_seconds: float,
        kubelets: KubeletSimulator | None = None,
    ) -> None:
        """``kubelets``: prepare/unprepare claims through the drivers' plugins; None: claims
        need only be allocated and reserved."""
        self._kube = kube
        self._kubelets = kubelets
        self._events = EventRecorder(kube)
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
        if self._kubelets is not None:
            await self._kubelets.scan_all()  # plugins already there count from the first pod on
        loops = [
            asyncio.create_task(self._claim_informer.run(), name="claim-informer"),
            asyncio.create_task(self._pod_informer.run(), name="pod-informer"),
            asyncio.create_task(self._recheck_waiting(), name="claim-recheck"),
        ]
        if self._kubelets is not None:
            loops.append(asyncio.create_task(self._kubelets.run(), name="kubelet-plugin-watcher"))
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

    def plugins_changed(self, node: str) -> None:
        """A driver plugin (de)registered on ``node``: retry failed prepares there now."""
        for state in self._pods.values():
            if not state.prepared and state.prepare_failures and state.pod["spec"].get("nodeName") == node:
                state.retry_at = 0.0
                state.wake.set()

    async def _recheck_waiting(self) -> None:
        while True:
            await asyncio.sleep(CLAIM_RECHECK_SECONDS)
            self._wake_waiting()

    # ---- one pod ---------------------------------------------------------------
    async def _drive(self, uid: str, state: _PodState) -> None:
        try:
            await self._drive_until_done(state)
            await self._release(state)
        finally:
            self._pods.pop(uid, None)
            self._tasks.pop(uid, None)
            self._events.forget(uid)

    async def _drive_until_done(self, state: _PodState) -> None:
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
                    await asyncio.wait_for(state.wake.wait(), None if math.isinf(sleep_for) else sleep_for)

    async def _release(self, state: _PodState) -> None:
        """NodeUnprepareResources once the pod is over; retried until the driver answers."""
        if self._kubelets is None or not state.prepared:
            return
        node = state.pod["spec"]["nodeName"]
        uid = state.pod["metadata"]["uid"]
        delay = PREPARE_BACKOFF_FIRST
        while True:
            try:
                error = await self._kubelets.release(node, uid)
            except Exception as err:  # a bug must not leave the claim prepared for ever quietly
                log.exception("pod %s: unprepare failed unexpectedly", _name(state.pod))
                error = str(err)
            if error is None:
                state.prepared = False
                log.info("pod %s: claims unprepared on %s", _name(state.pod), node)
                return
            log.warning("pod %s: %s; retrying in %.1fs", _name(state.pod), error, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, UNPREPARE_BACKOFF_MAX)

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
            if not state.prepared:
                wait = await self._prepare(state, node)
                if wait is not None:
                    return wait
            if wants_stall(pod):
                await self._patch_status(state, stalled_patch(pod, self._node_ips[node], self._pod_ip(node)))
                state.stalled = True
                log.info("pod %s stalled on purpose", _name(pod))
                return math.inf
            await self._patch_status(state, running_patch(pod, self._node_ips[node], self._pod_ip(node)))
            log.info("pod %s running on %s", _name(pod), node)
            return 0
        # Running: finish when the run time is over.
        if not state.prepared and self._kubelets is not None:
            # Found running (the simulator restarted): its claims were prepared before.
            node = pod["spec"]["nodeName"]
            uids = [c["metadata"]["uid"] for c in pod_claims(pod, self._claim_informer.cache)]
            self._kubelets.adopt(node, meta["uid"], uids)
            state.prepared = True
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

    async def _prepare(self, state: _PodState, node: str) -> float | None:
        """NodePrepareResources for the pod's claims: None when done, else seconds to wait."""
        pod = state.pod
        claims = pod_claims(pod, self._claim_informer.cache)
        if self._kubelets is None or not claims:
            state.prepared = True
            return None
        now = time.monotonic()
        if now < state.retry_at:
            return state.retry_at - now
        error = await self._kubelets.prepare(node, pod["metadata"]["uid"], claims)
        if error is None:
            state.prepared = True
            state.prepare_failures = 0
            log.info("pod %s: %d claim(s) prepared on %s", _name(pod), len(claims), node)
            return None
        state.prepare_failures += 1
        delay: float = min(PREPARE_BACKOFF_FIRST * 2.0 ** (state.prepare_failures - 1), PREPARE_BACKOFF_MAX)
        state.retry_at = time.monotonic() + delay
        message = f"Failed to prepare dynamic resources: {error}"
        log.warning("pod %s: %s; retry in %.1fs", _name(pod), message, delay)
        await self._events.record(pod, node, "Warning", PREPARE_FAILED_REASON, message)
        if state.prepare_error != message:
            await self._patch_status(state, prepare_failed_patch(pod, self._node_ips[node], message))
            state.prepare_error = message
        return delay

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
