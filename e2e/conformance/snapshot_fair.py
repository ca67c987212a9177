"""Cohort fair sharing's part of a checkpoint: for scenarios whose Configuration sets `fairSharing`.

On top of snapshot.py's state (unchanged, so the recordings of the other scenarios keep their
inputs hash): `status.fairSharing.weightedShare` of every ClusterQueue and every Cohort object,
the integer both managers write while fair sharing is on (None when a manager shows none).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from e2e.conformance.snapshot import KUEUE, take_snapshot
from e2e.testbed import KubeClient, api_path

Obj = dict[str, Any]


def enables_fair_sharing(configuration: Path) -> bool:
    """Whether a Configuration file turns cohort fair sharing on (a `fairSharing` section;
    in v1beta1 one with `enable: true`)."""
    doc = yaml.safe_load(configuration.read_text()) or {}
    section = doc.get("fairSharing")
    if not isinstance(section, dict):
        return False
    return bool(section.get("enable", True))


def weighted_share(obj: Obj) -> Any:
    """status.fairSharing.weightedShare, or None when not shown."""
    return ((obj.get("status") or {}).get("fairSharing") or {}).get("weightedShare")


async def take_fair_snapshot(kube: KubeClient, namespaces: tuple[str, ...]) -> dict[str, Any]:
    """snapshot.py's state plus each ClusterQueue's and Cohort's weighted share."""
    flat = await take_snapshot(kube, namespaces)
    for cq in (await kube.get(api_path(KUEUE, "clusterqueues")))["items"]:
        flat[f"ClusterQueue[{cq['metadata']['name']}].weightedShare"] = weighted_share(cq)
    for cohort in (await kube.get(api_path(KUEUE, "cohorts")))["items"]:
        flat[f"Cohort[{cohort['metadata']['name']}].weightedShare"] = weighted_share(cohort)
    return flat
