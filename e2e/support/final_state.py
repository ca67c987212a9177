"""The end state of a flood: every queue-labelled Job is admitted-and-finished (one pod, Succeeded)
or pending with a reason (suspended, QuotaReserved=False with a message, no pod). A pending Job
without a verdict of its own counts when a Workload of its namespace with the same pod sets and
priority has one: it waits untold behind it (Kueue's scheduling equivalence hashing)."""

from __future__ import annotations

import asyncio
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from e2e.support.workloads import KUEUE, condition, is_true, object_name, owner_uid, reserved
from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import Obj


@dataclass
class FinalState:
    finished: list[str] = field(default_factory=list)
    pending: dict[str, str] = field(default_factory=dict)  # job -> the Workload's message
    problems: list[str] = field(default_factory=list)


async def verify_final(kube: KubeClient, namespaces: Iterable[str]) -> FinalState:
    """Every queue-labelled Job is admitted-and-finished or pending with a reason."""
    state = FinalState()
    told: dict[tuple[str, str], str] = {}  # (namespace, equivalence) -> a verdict told
    untold: list[tuple[str, str, Obj]] = []
    for ns in namespaces:
        jobs = (await kube.get(api_path("batch/v1", "jobs", ns)))["items"]
        workloads = (await kube.get(api_path(KUEUE, "workloads", ns)))["items"]
        pods = (await kube.get(api_path("v1", "pods", ns)))["items"]
        by_owner: dict[str, list[Obj]] = defaultdict(list)
        for w in workloads:
            by_owner[owner_uid(w) or ""].append(w)
        pods_of: dict[str, list[Obj]] = defaultdict(list)
        for p in pods:
            pods_of[p["metadata"].get("labels", {}).get("job-name", "")].append(p)
        for job in jobs:
            name = object_name(job)
            owned = by_owner.get(job["metadata"]["uid"], [])
            if len(owned) != 1:
                state.problems.append(f"{name}: {len(owned)} Workloads {[object_name(w) for w in owned]}")
                continue
            wl = owned[0]
            job_pods = pods_of.get(job["metadata"]["name"], [])
            phases = [(p.get("status") or {}).get("phase") for p in job_pods]
            if is_true(job, "Complete"):
                status = job.get("status") or {}
                ok = (
                    is_true(wl, "Finished")
                    and reserved(wl)
                    and status.get("succeeded") == 1
                    and not status.get("failed")
                    and phases == ["Succeeded"]
                )
                if ok:
                    state.finished.append(name)
                else:
                    state.problems.append(
                        f"{name}: Complete but Workload Finished={is_true(wl, 'Finished')} "
                        f"reserved={reserved(wl)}, succeeded={status.get('succeeded')} "
                        f"failed={status.get('failed')}, pods {phases}"
                    )
                continue
            qr = condition(wl, "QuotaReserved") or {}
            waiting = job["spec"].get("suspend") and not phases and not is_true(wl, "Finished")
            if waiting and qr.get("status") == "False" and qr.get("message"):
                state.pending[name] = str(qr["message"])
                told[(ns, _equivalence(wl))] = str(qr["message"])
            elif waiting and not qr:
                untold.append((name, ns, wl))
            else:
                state.problems.append(
                    f"{name}: neither finished nor pending with a reason: "
                    f"suspend={job['spec'].get('suspend')} "
                    f"conditions={json.dumps((job.get('status') or {}).get('conditions'))} "
                    f"QuotaReserved={json.dumps(qr)} Finished={is_true(wl, 'Finished')} pods {phases}"
                )
    for name, ns, wl in untold:
        message = told.get((ns, _equivalence(wl)))
        if message is None:
            state.problems.append(f"{name}: pending without a reason, and none of its shape has one")
        else:
            state.pending[name] = f"(untold, as one of its shape: {message})"
    return state


def _equivalence(wl: Obj) -> str:
    """What Kueue's equivalence hash reads, as far as a flood's Jobs differ: pod sets and priority."""
    spec = wl.get("spec") or {}
    pod_sets = [
        [ps.get("count"), [c.get("resources") for c in ps["template"]["spec"].get("containers", [])]]
        for ps in spec.get("podSets", [])
    ]
    return json.dumps([pod_sets, spec.get("priority")], sort_keys=True)


async def settle_final(
    kube: KubeClient, namespaces: list[str], within: float, context: Callable[[], str]
) -> tuple[int, int]:
    """Wait until every Job is finished or pending with a reason; (finished, pending)."""
    began = time.monotonic()
    while True:
        state = await asyncio.wait_for(verify_final(kube, namespaces), timeout=30)
        if not state.problems:
            return len(state.finished), len(state.pending)
        if time.monotonic() - began > within:
            shown = "\n".join(state.problems[:15])
            raise AssertionError(
                f"{len(state.problems)} Jobs neither admitted-and-finished nor pending with a reason:\n"
                f"{shown}\n{context()}"
            )
        await asyncio.sleep(1.0)
