"""A reconciler harness with a controlled clock, for the waitForPodsReady flow."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from reconciler.api import Job, Pod, Workload
from reconciler.api.resources import WORKLOADS
from reconciler.api.times import rfc3339
from reconciler.config import parse_config
from reconciler.runtime.loop.reconciler import Reconciler
from reconciler.runtime.shared.actions import Action, MergePatch, PostEvent
from reconciler.runtime.shared.writer import WriteDone
from tests.support.builders import job_pod_metadata
from tests.support.reconciler_harness import (
    GPU,
    Harness,
    apply_patch,
    decode,
    gpu_job,
    of,
    submitted,
)

T0 = 1767225600.0  # 2026-01-01T00:00:00Z


def config(wait: Mapping[str, Any] | None = None, **strategy: Any) -> Any:
    """waitForPodsReady with a 60 s timeout; `wait`: its other fields (recoveryTimeout, ...)."""
    return parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
            "waitForPodsReady": {
                "timeout": "60s",
                "requeuingStrategy": {"backoffBaseSeconds": 10, **strategy},
                **(wait or {}),
            },
        }
    )


class Clocked(Harness):
    def __init__(self, wait: Mapping[str, Any] | None = None, **strategy: Any) -> None:
        super().__init__()
        self.now = T0
        self.reconciler = Reconciler(
            config(wait, **strategy),
            self.actions.append,
            clock=lambda: rfc3339(self.now),
            wall=lambda: self.now,
        )

    def tick(self, to: float) -> list[Action]:
        self.now = to
        self.reconciler.flush_status()
        return self.take()

    def land(self, action: MergePatch, workload: Workload) -> Workload:
        """The API applies a status write; its response and then its watch event come back."""
        written = apply_patch(self, workload, action)
        self.reconciler.handle(WriteDone(action, body=msgspec.json.encode(written)))
        return written


def queued_job(h: Clocked, name: str) -> tuple[Job, Workload, list[Action]]:
    """A Job, its Workload created and seen; returns what the reconciler then asked for."""
    job = gpu_job(h, name)
    workload = submitted(h, job)
    return job, workload, h.take()


def admitted_job(h: Clocked, name: str) -> tuple[Job, Workload, list[Action]]:
    job, workload, actions = queued_job(h, name)
    admits = of(actions, "admit")
    if not admits:
        return job, workload, actions
    admitted = h.land(admits[0], workload)
    h.event("MODIFIED", WORKLOADS, admitted)
    return job, admitted, actions + h.take()


def conditions(patch: MergePatch) -> dict[str, tuple[str, str, str]]:
    body = msgspec.json.decode(patch.patch)
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in body["status"]["conditions"]}


def events(actions: list[Action]) -> list[tuple[str, str]]:
    out = []
    for a in actions:
        if isinstance(a, PostEvent):
            body = msgspec.json.decode(a.body)
            out.append((body["reason"], body["message"]))
    return out


def started(h: Clocked, job: Job) -> Job:
    body = msgspec.json.decode(msgspec.json.encode(job))
    body["spec"]["suspend"] = False
    template = msgspec.json.decode(bytes(job.spec.template))
    template.setdefault("metadata", {})["labels"] = {"kueue.x-k8s.io/podset": "main"}
    template["spec"]["nodeSelector"] = {"gpu": "t4"}
    body["spec"]["template"] = template
    body["metadata"]["resourceVersion"] = h.next_rv()
    body["status"] = {"startTime": rfc3339(h.now), "active": 1}
    result: Job = decode(body, Job)
    return result


def ready_pod(job_name: str, ready: bool = True) -> Pod:
    """A running pod of that Job, ready or not, as the pod watch delivers it."""
    body = {
        "metadata": job_pod_metadata(job_name),
        "spec": {"nodeName": "n1"},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": str(ready)}]},
    }
    pod: Pod = decode(body, Pod)
    return pod
