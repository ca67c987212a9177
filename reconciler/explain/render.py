"""An `Explanation` in words (what `reconciler explain` prints) or as JSON (`-o json`)."""

from __future__ import annotations

import dataclasses
import json

from .explanation import Explanation, QuotaRow

__all__ = ["render_json", "render_text"]


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]


def _quota(rows: list[QuotaRow]) -> list[str]:
    table = [["POD SET", "RESOURCE", "FLAVOR", "REQUESTED", "NOMINAL", "IN USE", "FREE", "FITS"]]
    table += [
        [r.pod_set, r.resource, r.flavor, r.requested, r.nominal, r.in_use, r.free, "yes" if r.fits else "no"]
        for r in rows
    ]
    return _table(table)


def _section(title: str, lines: list[str], bullet: str = "- ") -> list[str]:
    if not lines:
        return []
    return ["", f"{title}:", *(f"  {bullet}{line}" for line in lines)]


def render_text(ex: Explanation) -> str:
    out = [f"{ex.subject} is {ex.state.upper()}: {ex.summary}"]
    facts = []
    if ex.workload:
        facts.append(("Workload", ex.workload))
    if ex.origin is not None:
        # (The origin is the manager's multiKueue.origin setting, "multikueue" unless set.)
        facts.append(("From", f"MultiKueue manager {ex.origin!r} (kueue.x-k8s.io/multikueue-origin)"))
    if ex.local_queue:
        queue = f"LocalQueue {ex.local_queue}"
        if ex.cluster_queue:
            queue += f" -> ClusterQueue {ex.cluster_queue}"
        facts.append(("Queue", queue))
    if ex.fair_sharing:
        facts.append(("Fair sharing", ex.fair_sharing))
    if facts:
        out.append("")
        width = max(len(k) for k, _ in facts) + 1
        out += [f"{(k + ':').ljust(width)} {v}" for k, v in facts]
    out += _section("The controller says", ex.controller_says)
    if ex.quota:
        out += ["", f"Quota of ClusterQueue {ex.cluster_queue}:", *_quota(ex.quota)]
    holders = [f"{h.name} (Workload {h.workload}): {h.amount} {h.resource} in {h.flavor}" for h in ex.holders]
    out += _section("Held by", holders)
    out += _section("For it to fit", ex.to_fit)
    out += _section("Ahead of it in the queue", ex.ahead)
    out += _section("Fair sharing: weighted shares (without this workload)", ex.cohort_shares)
    out += _section("Claims", ex.claims)
    out += _section("Pods", ex.pods)
    out += _section("Problems and fixes", ex.findings)
    out += _section("Warning events", ex.events)
    out += _section("Notes", ex.notes)
    return "\n".join(out) + "\n"


def render_json(ex: Explanation) -> str:
    return json.dumps(dataclasses.asdict(ex), indent=2) + "\n"
