"""What a scheduling cycle decides: admit a workload with its flavors, leave it pending with
Kueue's reason and message, or evict workloads so that a pending one fits."""

from __future__ import annotations

from dataclasses import dataclass

from .flavors import PodSetFlavors
from .preemption import Target

__all__ = [
    "NAMESPACE_MISMATCH",
    "NO_LONGER_FITS",
    "REASON_INADMISSIBLE",
    "REASON_PENDING",
    "Admit",
    "Decision",
    "Pending",
    "Preempt",
    "WorkloadKey",
]

WorkloadKey = tuple[str, str]

# Kueue's reasons with its granular-reasons feature off, as users of the walkthrough see them:
# quota waits are "Pending", configuration problems "Inadmissible".
REASON_PENDING = "Pending"
REASON_INADMISSIBLE = "Inadmissible"
NAMESPACE_MISMATCH = "Workload namespace doesn't match ClusterQueue selector"
NO_LONGER_FITS = "Workload no longer fits after processing another workload"


@dataclass(frozen=True, slots=True)
class Admit:
    key: WorkloadKey
    cluster_queue: str
    pod_sets: list[PodSetFlavors]
    # Kueue's "Flavors considered" for the QuotaReserved Event ("" when nothing to say).
    considered: str = ""
    # What the charges the flavors decided came to (allocationMode All, device capacities).
    charged: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pending:
    key: WorkloadKey
    reason: str
    message: str
    # Set when the workload is not in any ClusterQueue's queue.
    cluster_queue: str | None = None


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict `targets` so that the pending workload `key` fits (it stays pending meanwhile)."""

    key: WorkloadKey
    cluster_queue: str
    targets: tuple[Target, ...]


Decision = Admit | Pending | Preempt
