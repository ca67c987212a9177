"""A dry run against a snapshot of the cluster: would these objects be admitted now, where, and
what would they preempt (`reconciler explain --what-if FILE`; beyond Kueue).

The snapshot is the cluster's queue objects and its Workloads (read by the caller): admitted
Workloads hold their quota, pending ones wait in their queues' order, finished and deactivated
ones are left out. The objects asked about arrive last, as if created now, and the admission run
of `reconciler simulate` goes on until nothing more happens. So a pending Workload that would fit
now is admitted ahead of them, as the controller's next cycle would admit it. Time does not pass:
requeue backoffs, PodsReady timeouts and the 1 s retry batch are not simulated, and what the
controller has not yet seen (an admission in flight) is not in the snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from reconciler.core.scheduling.scheduler import Admit, Pending
from reconciler.core.status import condition

from .inputs import InputObject
from .run import FairSharing, Preempted, admit_in_turn, prepare

__all__ = ["Victim", "WhatIf", "WhatIfSettings", "render_what_if", "what_if"]

Key = tuple[str, str]


@dataclass(frozen=True, slots=True)
class WhatIfSettings:
    """The Configuration's parts the admission run needs (as `reconciler simulate` reads them)."""

    mappings: Mapping[str, str]
    inventory_mode: str = "Off"
    requeuing_timestamp: str = "Eviction"
    capacities: Mapping[str, Sequence[tuple[str, str]]] = field(default_factory=dict)
    frameworks: Sequence[str] = ()  # integrations.frameworks (the Configuration's)
    fair: FairSharing | None = None
    extended_resources: bool = False


@dataclass(frozen=True, slots=True)
class Victim:
    namespace: str
    name: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class WhatIf:
    """The verdict on one Workload of the objects asked about."""

    namespace: str
    workload: str
    admitted: bool
    cluster_queue: str = ""
    # pod set name -> {resource: flavor}
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    # why it would wait (its QuotaReserved message), when not admitted
    waiting: str = ""
    preempts: list[Victim] = field(default_factory=list)


def _live(objects: Sequence[InputObject]) -> list[InputObject]:
    """The snapshot without the Workloads that hold nothing and never will (finished, deactivated)."""
    kept = []
    for obj in objects:
        body = obj.body
        if body.get("kind") == "Workload":
            if (body.get("spec") or {}).get("active") is False:
                continue
            conditions = (body.get("status") or {}).get("conditions") or []
            if any(c.get("type") == "Finished" and c.get("status") == "True" for c in conditions):
                continue
        kept.append(obj)
    return kept


def _arriving_now(objects: Sequence[InputObject], now: str) -> list[InputObject]:
    """The objects asked about, created now: after everything in the snapshot."""
    out = []
    for obj in objects:
        meta = dict(obj.body.get("metadata") or {})
        meta["creationTimestamp"] = now
        out.append(InputObject(obj.source, {**obj.body, "metadata": meta}))
    return out


def _key(obj: InputObject) -> Key | None:
    meta = obj.body.get("metadata") or {}
    if obj.body.get("kind") != "Workload":
        return None
    return (str(meta.get("namespace", "")), str(meta.get("name", "")))


def what_if(
    snapshot: Sequence[InputObject], asked: Sequence[InputObject], settings: WhatIfSettings, now: str
) -> tuple[list[WhatIf], list[str]]:
    """The verdict on each Workload the `asked` objects stand for, and the run's warnings (an
    object not managed says why)."""
    live = _live(snapshot)
    live_keys = {k for k in map(_key, live) if k is not None}
    prepared = prepare(
        [*live, *_arriving_now(asked, now)],
        settings.mappings,
        settings.inventory_mode,
        settings.requeuing_timestamp,
        settings.capacities,
        settings.frameworks,
        settings.fair,
        settings.extended_resources,
    )
    trails = admit_in_turn(prepared)
    verdicts = []
    for key in prepared.workloads:
        if key in live_keys:
            continue
        victims = [
            Victim(k[0], k[1], step.reason, step.message)
            for k, trail in trails.items()
            for step in trail
            if isinstance(step, Preempted) and step.by == key
        ]
        trail = trails.get(key, [])
        admitted = next((s for s in reversed(trail) if isinstance(s, Admit)), None)
        if admitted is not None and trail[-1] is admitted:
            flavors = {ps.name: dict(ps.flavors) for ps in admitted.pod_sets}
            verdicts.append(WhatIf(key[0], key[1], True, admitted.cluster_queue, flavors, preempts=victims))
            continue
        pending = next((s for s in reversed(trail) if isinstance(s, Pending)), None)
        workload = prepared.workloads[key]
        reserved = condition(workload.status.conditions, "QuotaReserved")
        waiting = pending.message if pending is not None else (reserved.message if reserved else "")
        verdicts.append(WhatIf(key[0], key[1], False, waiting=waiting, preempts=victims))
    return verdicts, list(prepared.collected.warnings)


def render_what_if(verdicts: Sequence[WhatIf], warnings: Sequence[str], output: str) -> str:
    if output == "json":
        body: dict[str, Any] = {"workloads": [asdict(v) for v in verdicts], "warnings": list(warnings)}
        return json.dumps(body, indent=2) + "\n"
    lines = [f"warning: {w}" for w in warnings]
    if not verdicts:
        lines.append("nothing in the file would be queued (no Workload)")
    for v in verdicts:
        lines.append(f"Workload {v.namespace}/{v.workload}:")
        if v.admitted:
            lines.append(f"  would be admitted now to ClusterQueue {v.cluster_queue}")
            for pod_set, flavors in v.flavors.items():
                chosen = ", ".join(f"{r} in flavor {f}" for r, f in sorted(flavors.items()))
                lines.append(f"    pod set {pod_set}: {chosen or 'no resources'}")
        else:
            lines.append(f"  would wait: {v.waiting or 'not considered (see the warnings)'}")
        if v.preempts:
            verb = "by preempting" if v.admitted else "preempting first (then it is considered again)"
            lines.append(f"  {verb} {len(v.preempts)} workload(s):")
            lines += [f"    {p.namespace}/{p.name} ({p.reason}): {p.message}" for p in v.preempts]
    return "\n".join(lines) + "\n"
