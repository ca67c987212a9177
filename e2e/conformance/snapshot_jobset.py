"""The part of a checkpoint for scenarios where JobSet's manager runs (`jobsetController: true`).

On top of snapshot.py's state (unchanged, so the other recordings keep their inputs hash): the
pods of a JobSet's Jobs are named `<job>-<completion index>-<5 random characters>`, which
snapshot.py's pod-name pattern (`<job>-<5 random characters>`) does not cover, so the Job
controller's `Created pod: ...` Events would differ between any two runs. Here such a name becomes
`<pod of JOB>` in every Event.
"""

from __future__ import annotations

import re
from typing import Any

from e2e.conformance.snapshot import take_snapshot
from e2e.testbed import KubeClient

_JOB_KEY = re.compile(r"^Job\[[^/\]]+/([^\]]+)\]\.")


def indexed_pods_named(flat: dict[str, Any]) -> dict[str, Any]:
    """`flat` with `<job>-<index>-<random>` pod names in its Events made `<pod of JOB>`."""
    jobs = sorted({m.group(1) for key in flat if (m := _JOB_KEY.match(key))}, key=len, reverse=True)
    patterns = [(re.compile(rf"\b{re.escape(job)}-\d+-[a-z0-9]{{5}}\b"), f"<pod of {job}>") for job in jobs]

    def named(text: str) -> str:
        for pattern, stable in patterns:
            text = pattern.sub(stable, text)
        return text

    if "Events" in flat:
        flat = {**flat, "Events": sorted({named(e) for e in flat["Events"]})}
    return flat


async def take_jobset_snapshot(kube: KubeClient, namespaces: tuple[str, ...]) -> dict[str, Any]:
    """snapshot.py's state with the JobSet Jobs' pod names made stable in Events."""
    return indexed_pods_named(await take_snapshot(kube, namespaces))
