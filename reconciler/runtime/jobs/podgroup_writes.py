"""The writes to a pod group's pods, one pod at a time, as Kueue makes them: a gated pod started
on its role's flavors, a pod stopped (the `TerminationTarget` condition, then its deletion), an
excess pod let go and deleted, a pod's finalizer removed. Each is asked for once; the API's
answer is the pod's newest state, handed back to the group concern (`applied`)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import msgspec

from reconciler.api.pods import ManagedPod
from reconciler.api.resources import PODS
from reconciler.integrations import POD, PodSetStart
from reconciler.integrations.pods.group import has_finalizer, termination_patch
from reconciler.integrations.pods.pod import pod_start_patch
from reconciler.kube import Conflict, NotFound
from reconciler.runtime.shared.actions import Delete, MergePatch, Purpose, WriteDone
from reconciler.runtime.shared.context import Context
from reconciler.runtime.shared.own_writes import OwnWrites
from reconciler.runtime.shared.store import Key

__all__ = ["EXCESS_DELETED", "GroupPodWrites"]

EXCESS_DELETED = "Excess pod deleted"


def _key(pod: ManagedPod) -> Key:
    return (pod.metadata.namespace, pod.metadata.name)


class GroupPodWrites:
    def __init__(self, ctx: Context, applied: Callable[[Key, ManagedPod], None]) -> None:
        self.ctx = ctx
        # The group concern takes a pod's state from our write's response (and looks again).
        self._applied = applied
        # Pods asked to stop, or (excess) to go, by UID: asked once.
        self._stopping: dict[Key, str] = {}
        self._deleting: dict[Key, str] = {}

    @property
    def _writes(self) -> OwnWrites[Key]:
        return self.ctx.kind_writes[POD.kind]

    def forget(self, key: Key) -> None:
        """The pod is gone."""
        self._stopping.pop(key, None)
        self._deleting.pop(key, None)

    # --- what the group's plan asks for --------------------------------------------------

    def start(self, pod: ManagedPod, start: PodSetStart, cluster_queue: str) -> None:
        """Ungate a pod with its role's node labels, tolerations and pod set label (Event Started)."""
        if self._writes.in_flight(_key(pod), "job-start"):
            return
        message = f"Admitted by clusterQueue {cluster_queue}"
        done = partial(self._done, pod=pod, reason="Started", message=message)
        self._patch("job-start", pod, pod_start_patch(pod, start), done)

    def release(self, pod: ManagedPod) -> None:
        """Remove Kueue's finalizer (Kueue's finalizePods)."""
        patch = POD.release_patch(pod)
        if patch is None or self._writes.in_flight(_key(pod), "job-release"):
            return
        self._patch("job-release", pod, patch.body, partial(self._done, pod=pod))

    def stop(self, pod: ManagedPod, reason: str, message: str) -> None:
        """Kueue's Stop of one pod: TerminationTarget=True (reason, message), then deleted (Event
        Stopped with the message)."""
        key = _key(pod)
        if self._stopping.get(key) == pod.metadata.uid:
            return
        self._stopping[key] = pod.metadata.uid
        body = termination_patch(pod, reason, message, self.ctx.clock())
        done = partial(self._marked, pod=pod, message=message)
        self.ctx.write(MergePatch("job-terminate", PODS, *key, body, subresource="status", on_done=done))

    def delete_excess(self, pod: ManagedPod) -> None:
        """A pod beyond its role's count: let go and deleted (Event ExcessPodDeleted)."""
        if has_finalizer(pod):
            self.release(pod)
        key = _key(pod)
        if pod.metadata.deletion_timestamp or self._deleting.get(key) == pod.metadata.uid:
            return
        self._deleting[key] = pod.metadata.uid
        done = partial(self._deleted, pod=pod, reason="ExcessPodDeleted", message=EXCESS_DELETED)
        self.ctx.write(Delete("job-delete", PODS, *key, on_done=done))

    # --- the API's answers ---------------------------------------------------------------

    def _patch(
        self, purpose: Purpose, pod: ManagedPod, body: bytes, on_done: Callable[[WriteDone], None]
    ) -> None:
        self.ctx.write(MergePatch(purpose, PODS, *_key(pod), body, on_done=on_done))

    def _apply(self, done: WriteDone) -> bool:
        """Take the pod's state from a write's response; False when the write failed."""
        if not done.ok or not done.body:
            self.ctx.write_failed(done, expected=(NotFound, Conflict))
            return False
        pod = msgspec.json.decode(done.body, type=ManagedPod)
        rv = pod.metadata.resource_version
        if not self._writes.response_is_stale(done.key, rv):
            self._writes.applied(done.key, rv, changed=True)
            self._applied(done.key, pod)
        return True

    def _done(self, done: WriteDone, *, pod: ManagedPod, reason: str = "", message: str = "") -> None:
        if self._apply(done) and reason:
            self.ctx.events.emit(pod, "Normal", reason, message)

    def _marked(self, done: WriteDone, *, pod: ManagedPod, message: str) -> None:
        key = done.key
        if not self._apply(done):
            if not isinstance(done.error, NotFound):
                self._stopping.pop(key, None)  # asked again on the next look
            return
        done_delete = partial(self._deleted, pod=pod, reason="Stopped", message=message)
        self.ctx.write(Delete("job-delete", PODS, *key, on_done=done_delete))

    def _deleted(self, done: WriteDone, *, pod: ManagedPod, reason: str, message: str) -> None:
        if done.ok:
            self.ctx.events.emit(pod, "Normal", reason, message)
            return
        self.ctx.write_failed(done, expected=(NotFound,))
        if not isinstance(done.error, NotFound):
            self._stopping.pop(done.key, None)
            self._deleting.pop(done.key, None)
