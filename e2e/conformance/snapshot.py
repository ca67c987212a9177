"""The normalized state compared between Kueue and the controller at a checkpoint.

Flat `{field path: value}`; objects are named by what both runs share (a Workload by its
owner Job, never by its hashed name), UIDs and the Workloads' hashed names in messages are
replaced, and times are left out (only whether a requeueAt is set is kept).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from e2e.testbed import KubeClient, api_path

Obj = dict[str, Any]
KUEUE = "kueue.x-k8s.io/v1beta2"
_UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Kueue's (and the controller's) name of a Job's Workload: job-<job name>-<5 hex digits>.
_JOB_WORKLOAD = re.compile(r"^job-(.+)-[0-9a-f]{5}$")
# A duration stands alone: a generated name's last part (a pod's `-5794s`) is not one.
_DURATION = re.compile(r"(?<![\w-])\d+(?:\.\d+)?(?:ms|s|m|h)(?![\w-])")
_QUEUE_STATUS = (
    "pendingWorkloads",
    "reservingWorkloads",
    "admittedWorkloads",
    "flavorsReservation",
    "flavorsUsage",
)


def _owner(wl: Obj) -> str:
    refs = wl["metadata"].get("ownerReferences") or []
    return f"{refs[0]['kind']}/{refs[0]['name']}" if refs else f"Workload/{wl['metadata']['name']}"


class Normalizer:
    """Replaces what differs between any two runs in messages: UIDs, Workload names (hashed),
    pod names (random suffix) and durations (wait times)."""

    def __init__(self, workloads: list[Obj], jobs: list[Obj], gone: Iterable[Obj] = ()) -> None:
        """`gone`: Events whose Job or Workload may no longer exist (a deleted Job)."""
        self._names = {wl["metadata"]["name"]: f"<workload of {_owner(wl)}>" for wl in workloads}
        job_names = {job["metadata"]["name"] for job in jobs}
        for event in gone:
            involved = event.get("involvedObject") or {}
            name = involved.get("name", "")
            if involved.get("kind") == "Job":
                job_names.add(name)
            elif involved.get("kind") == "Workload" and name not in self._names:
                match = _JOB_WORKLOAD.match(name)
                if match:
                    self._names[name] = f"<workload of Job/{match.group(1)}>"
        self._pods = [
            (re.compile(rf"\b{re.escape(name)}-[a-z0-9]{{5}}\b"), name) for name in sorted(job_names)
        ]

    def owner_of(self, workload_name: str) -> str | None:
        """`Job/NAME` (or `Workload/NAME`) of a Workload seen, or named in an Event."""
        stable = self._names.get(workload_name)
        return stable[len("<workload of ") : -1] if stable else None

    def text(self, value: str) -> str:
        for name, stable in sorted(self._names.items(), key=lambda kv: -len(kv[0])):
            value = value.replace(name, stable)
        for pattern, job in self._pods:
            value = pattern.sub(f"<pod of {job}>", value)
        return _DURATION.sub("<duration>", _UID.sub("<uid>", value))


def _conditions(obj: Obj, norm: Normalizer) -> dict[str, str]:
    out: dict[str, str] = {}
    for c in (obj.get("status") or {}).get("conditions") or []:
        reason, message = c.get("reason", ""), norm.text(c.get("message", ""))
        out[f"conditions.{c['type']}"] = f"{c.get('status')} {reason}: {message}"
    return out


def _workload(wl: Obj, norm: Normalizer) -> dict[str, Any]:
    status = wl.get("status") or {}
    out: dict[str, Any] = _conditions(wl, norm)
    out["admission"] = status.get("admission")
    requeue = status.get("requeueState")
    out["requeueState"] = (
        {"count": requeue.get("count"), "requeueAt": "set" if requeue.get("requeueAt") else None}
        if requeue
        else None
    )
    out["active"] = wl["spec"].get("active", True)
    out["priority"] = wl["spec"].get("priority")
    return out


def _job(job: Obj) -> dict[str, Any]:
    pod = job["spec"]["template"]["spec"]
    return {
        "suspend": job["spec"].get("suspend", False),
        "nodeSelector": pod.get("nodeSelector") or {},
        "tolerations": pod.get("tolerations") or [],
    }


def _queue(queue: Obj, norm: Normalizer) -> dict[str, Any]:
    status = queue.get("status") or {}
    out: dict[str, Any] = {k: status.get(k) for k in _QUEUE_STATUS}
    out.update(_conditions(queue, norm))
    return out


async def take_snapshot(kube: KubeClient, namespaces: tuple[str, ...]) -> dict[str, Any]:
    workloads: list[Obj] = []
    jobs: list[Obj] = []
    local_queues: list[Obj] = []
    events: list[Obj] = []
    for ns in namespaces:
        workloads += (await kube.get(api_path(KUEUE, "workloads", ns)))["items"]
        jobs += (await kube.get(api_path("batch/v1", "jobs", ns)))["items"]
        local_queues += (await kube.get(api_path(KUEUE, "localqueues", ns)))["items"]
        events += (await kube.get(api_path("v1", "events", ns)))["items"]
    cluster_queues = (await kube.get(api_path(KUEUE, "clusterqueues")))["items"]
    norm = Normalizer(workloads, jobs, events)
    flat: dict[str, Any] = {}

    def put(prefix: str, fields: dict[str, Any]) -> None:
        for key, value in fields.items():
            flat[f"{prefix}.{key}"] = value

    for wl in workloads:
        put(f"Workload[{wl['metadata']['namespace']}/{_owner(wl)}]", _workload(wl, norm))
    for job in jobs:
        put(f"Job[{job['metadata']['namespace']}/{job['metadata']['name']}]", _job(job))
    for cq in cluster_queues:
        put(f"ClusterQueue[{cq['metadata']['name']}]", _queue(cq, norm))
    for lq in local_queues:
        put(f"LocalQueue[{lq['metadata']['namespace']}/{lq['metadata']['name']}]", _queue(lq, norm))
    seen: set[str] = set()
    for ev in events:
        involved = ev.get("involvedObject") or {}
        if involved.get("kind") not in ("Job", "Workload", "ClusterQueue", "LocalQueue"):
            continue
        name = involved.get("name", "")
        owner = norm.owner_of(name) if involved["kind"] == "Workload" else None
        who = f"{involved['kind']}[{owner or name}]"
        seen.add(f"{who} {ev.get('type')} {ev.get('reason')}: {norm.text(ev.get('message', ''))}")
    flat["Events"] = sorted(seen)
    return flat
