"""Benchmark: the reconciler alone, fed a replayed API: CPU time per Job from creation to finished.

A tiny in-process API answers every write the reconciler asks for (create, JSON merge patch,
Events) and then delivers the watch event of the object it wrote, as a real API server would.
N queue-labelled Jobs (one GPU through a ResourceClaimTemplate) are created over Q ClusterQueues
with quota for all; each is admitted and started, then completes and its Workload is finished.
No network, no event loop: the figure is the reconciler's own CPU cost per Job, which makes two
versions comparable on a busy machine (run each a few times, or under `valgrind --tool=callgrind`
for instruction counts). Prints figures; asserts only that every Job finished.

Run: `.venv/bin/python -m bench.reconciler_replay [--jobs N] [--queues Q]`; against another
version's `reconciler` package (base vs head): `PYTHONPATH=DIR .venv/bin/python bench/reconciler_replay.py`
from a directory holding that version (e.g. `git archive BASE | tar -x -C DIR`).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import time
from collections import deque
from types import ModuleType
from typing import Any

import msgspec

from reconciler.config import parse_config
from reconciler.kube import WatchEvent
from reconciler.runtime.loop.reconciler import WATCHED, Reconciler
from reconciler.runtime.shared.writer import WriteDone

try:  # this version's layout: the API types in the floor
    types: ModuleType = importlib.import_module("reconciler.api")
except ImportError:  # before the api floor existed (to compare with older commits)
    types = importlib.import_module("reconciler.core.projections")

Obj = dict[str, Any]
GPU = "nvidia.com/gpu"
CONFIG = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta2",
    "kind": "Configuration",
    "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
}
KIND_TYPES = {
    "jobs": "Job",
    "workloads": "Workload",
    "clusterqueues": "ClusterQueue",
    "localqueues": "LocalQueue",
    "resourceflavors": "ResourceFlavor",
    "namespaces": "Namespace",
    "resourceclaimtemplates": "ResourceClaimTemplate",
}


def merge(target: Obj, patch: Obj) -> None:
    """RFC 7386 JSON merge patch."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class ReplayApi:
    """Holds objects, answers writes, and queues the watch events those writes cause."""

    def __init__(self, reconciler_submit: list[Any]) -> None:
        self.objects: dict[tuple[str, str, str], Obj] = {}
        self.rv = 1000
        self.inbox: deque[Any] = deque()
        self.writes = reconciler_submit
        self.by_plural = {r.plural: r for r in WATCHED}

    def _stamp(self, obj: Obj) -> None:
        self.rv += 1
        obj["metadata"]["resourceVersion"] = str(self.rv)

    def put(self, plural: str, obj: Obj, kind: str = "ADDED") -> None:
        meta = obj["metadata"]
        meta.setdefault("uid", f"uid-{plural}-{meta['name']}")
        meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        meta.setdefault("generation", 1)
        self._stamp(obj)
        self.objects[(plural, meta.get("namespace", ""), meta["name"])] = obj
        self.inbox.append(self._event(kind, plural, obj))

    def _event(self, kind: str, plural: str, obj: Obj) -> Any:
        resource = self.by_plural[plural]
        projection = getattr(types, KIND_TYPES[plural])
        decoded = msgspec.json.decode(msgspec.json.encode(obj), type=projection)
        meta = obj["metadata"]
        return WatchEvent(kind, resource, (meta.get("namespace", ""), meta["name"]), decoded)  # type: ignore[arg-type]

    def answer(self) -> None:
        """Answer every write asked for so far: its response, then its watch event."""
        while self.writes:
            action = self.writes.pop(0)
            plural = action.resource.plural
            if plural == "events":
                self.inbox.append(WriteDone(action, body=b"{}"))
                continue
            if hasattr(action, "body"):  # a create
                obj = msgspec.json.decode(action.body)
                obj["metadata"]["namespace"] = action.namespace
                self.put(plural, obj)
                event = self.inbox.pop()
                self.inbox.append(WriteDone(action, body=msgspec.json.encode(obj)))
                self.inbox.append(event)
                continue
            obj = self.objects[(plural, action.namespace or "", action.name)]
            patch = msgspec.json.decode(action.patch)
            meta_patch = patch.pop("metadata", None) or {}
            meta_patch.pop("resourceVersion", None)  # a precondition, not a change
            if action.subresource == "status":
                patch = {"status": patch.get("status", {})}
            elif meta_patch:
                patch["metadata"] = meta_patch  # e.g. the in-use finalizers
            obj.setdefault("status", {})
            merge(obj, patch)
            if "spec" in patch:
                obj["metadata"]["generation"] += 1
            self._stamp(obj)
            self.inbox.append(WriteDone(action, body=msgspec.json.encode(obj)))
            self.inbox.append(self._event("MODIFIED", plural, obj))


def job(i: int, namespace: str) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"job-{i}",
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {
            "parallelism": 1,
            "completions": 1,
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}],
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
                    ],
                }
            },
        },
    }


def queue_objects(api: ReplayApi, queues: int, jobs: int) -> list[str]:
    namespaces = [f"ns-{q}" for q in range(queues)]
    api.put("resourceflavors", {"metadata": {"name": "t4"}, "spec": {"nodeLabels": {"gpu": "t4"}}})
    for ns in namespaces:
        api.put("namespaces", {"metadata": {"name": ns}})
        api.put(
            "clusterqueues",
            {
                "metadata": {"name": f"cq-{ns}"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", GPU],
                            "flavors": [
                                {
                                    "name": "t4",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": str(jobs)},
                                        {"name": GPU, "nominalQuota": jobs},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
        )
        api.put(
            "localqueues", {"metadata": {"name": "lq", "namespace": ns}, "spec": {"clusterQueue": f"cq-{ns}"}}
        )
        request = {"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1}}
        api.put(
            "resourceclaimtemplates",
            {
                "metadata": {"name": "single-gpu", "namespace": ns},
                "spec": {"spec": {"devices": {"requests": [request]}}},
            },
        )
    return namespaces


def run(reconciler: Reconciler, api: ReplayApi, batch: int) -> None:
    """Feed the inbox in batches, answering writes, until nothing is left to do."""
    while api.inbox or api.writes:
        for _ in range(min(batch, len(api.inbox))):
            reconciler.handle(api.inbox.popleft())
        reconciler.after_batch()
        api.answer()


def replay(jobs: int, queues: int, batch: int) -> tuple[float, int]:
    writes: list[Any] = []
    reconciler = Reconciler(parse_config(CONFIG), writes.append)
    api = ReplayApi(writes)
    namespaces = queue_objects(api, queues, jobs)
    for resource in WATCHED:
        api.inbox.append(WatchEvent("SYNCED", resource, ("", ""), None))
    run(reconciler, api, batch)
    started = time.process_time()
    for i in range(jobs):
        api.put("jobs", job(i, namespaces[i % queues]))
    run(reconciler, api, batch)
    for (plural, _ns, _name), obj in list(api.objects.items()):
        if plural == "jobs":
            obj["status"] = {"conditions": [{"type": "Complete", "status": "True", "message": "done"}]}
            api._stamp(obj)
            api.inbox.append(api._event("MODIFIED", "jobs", obj))
    run(reconciler, api, batch)
    seconds = time.process_time() - started
    finished = sum(
        1
        for (plural, _ns, _name), obj in api.objects.items()
        if plural == "workloads"
        and any(
            c["type"] == "Finished" and c["status"] == "True" for c in obj["status"].get("conditions", [])
        )
    )
    return seconds, finished


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.reconciler_replay", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--queues", type=int, default=10)
    parser.add_argument("--batch", type=int, default=256, help="inbox items per batch (the controller's max)")
    args = parser.parse_args()
    seconds, finished = replay(args.jobs, args.queues, args.batch)
    assert finished == args.jobs, f"only {finished} of {args.jobs} Workloads finished"
    print(f"jobs: {args.jobs} over {args.queues} ClusterQueues, each created, admitted, started, finished")
    print(f"reconciler CPU time: {seconds:.2f} s = {seconds / args.jobs * 1e6:,.0f} us per Job")


if __name__ == "__main__":
    main()
