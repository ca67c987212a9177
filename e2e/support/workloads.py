"""Reading Kueue Workloads and Jobs as the e2e checks need them: conditions, quota held, usage
charged (as exact Kubernetes quantities), the owning Job."""

from __future__ import annotations

import functools
from collections import defaultdict
from fractions import Fraction

from e2e.testbed.kubeclient import Obj

KUEUE = "kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

FlavorResource = tuple[str, str, str]  # (cluster queue, flavor, resource)

_SUFFIXES: dict[str, Fraction] = {
    "m": Fraction(1, 1000),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
}
_SUFFIX_ORDER = sorted(_SUFFIXES, key=len, reverse=True)


@functools.lru_cache(maxsize=1024)
def _parse(value: str) -> Fraction:
    for suffix in _SUFFIX_ORDER:
        if value.endswith(suffix):
            return Fraction(value[: -len(suffix)]) * _SUFFIXES[suffix]
    return Fraction(value)


def parse_quantity(text: str | int | float) -> Fraction:
    """A Kubernetes quantity (``500m``, ``2``, ``16Gi``, ``1.5``) as an exact number."""
    return _parse(str(text).strip())


def condition(obj: Obj, kind: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            found: Obj = c
            return found
    return None


def is_true(obj: Obj, kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


def reserved(workload: Obj) -> bool:
    """QuotaReserved=True with an admission."""
    return bool((workload.get("status") or {}).get("admission")) and is_true(workload, "QuotaReserved")


def holds_quota(workload: Obj) -> bool:
    return reserved(workload) and not is_true(workload, "Finished")


def usage_of(workload: Obj) -> dict[FlavorResource, Fraction]:
    """What an admitted Workload charges, by (cluster queue, flavor, resource)."""
    admission = workload["status"]["admission"]
    cq = admission["clusterQueue"]
    charged: dict[FlavorResource, Fraction] = defaultdict(Fraction)
    for psa in admission.get("podSetAssignments") or []:
        flavors = psa.get("flavors") or {}
        for resource, amount in (psa.get("resourceUsage") or {}).items():
            charged[(cq, flavors.get(resource, "?"), resource)] += parse_quantity(amount)
    return dict(charged)


def owner_uid(obj: Obj) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("controller"):
            return str(ref["uid"])
    return None


def resource_version(obj: Obj) -> int:
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, ValueError):
        return 0


def object_name(obj: Obj) -> str:
    """``namespace/name``."""
    return f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
