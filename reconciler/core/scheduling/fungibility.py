"""Flavor fungibility: how good one flavor's outcome is, and whether the search goes on past it.

A flavor tried for a pod set ends in a mode, from worst to best: it cannot hold the request
(NoFit), it could once others are preempted but preemption finds nobody (NoCandidates), it needs
the preemption of workloads of its own ClusterQueue among others (Preempt), only of other
ClusterQueues of its cohort (Reclaim), or it fits. Each comes with how high in the cohort tree it
borrows (0: not at all). As in Kueue v0.18.1:

- `whenCanBorrow: MayStopSearch` (the default) stops at a flavor that fits by borrowing;
  `whenCanPreempt: MayStopSearch` stops at one where preemption found candidates (the default,
  TryNextFlavor, looks on). A flavor that fits without borrowing always stops the search.
- Among the flavors tried, the best outcome wins, the earlier flavor on a tie. `preference`
  orders outcomes: `BorrowingOverPreemption` (the default) puts the mode first, then the
  borrowing height; `PreemptionOverBorrowing` the borrowing height first, then the mode.
"""

from __future__ import annotations

from typing import Protocol

from ..quota.ledger import FlavorResource

__all__ = [
    "BEST",
    "FIT",
    "NO_CANDIDATES",
    "NO_FIT",
    "PREEMPT",
    "PREEMPTION_OVER_BORROWING",
    "RECLAIM",
    "Outcome",
    "PreemptionOracle",
    "is_preferred",
    "mode_text",
    "should_try_next",
]

NO_FIT, NO_CANDIDATES, PREEMPT, RECLAIM, FIT = range(5)
PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"
_POSSIBILITY = {NO_CANDIDATES: "NoCandidates", PREEMPT: "Preempt", RECLAIM: "Reclaim"}

# (mode, borrowing height)
Outcome = tuple[int, int]
BEST: Outcome = (FIT, 0)


class PreemptionOracle(Protocol):
    """What preemption could do for `amount` of one flavor-resource: (NO_CANDIDATES, PREEMPT or
    RECLAIM, the borrowing height once the candidates are gone)."""

    # Preemption may be tried while the ClusterQueue borrows (borrowWithinCohort, or fair
    # sharing with reclaimWithinCohort).
    while_borrowing: bool

    def possibility(self, fr: FlavorResource, amount: int) -> Outcome: ...


def is_preferred(a: Outcome, b: Outcome, preference: str | None) -> bool:
    """Whether outcome `a` is strictly better than `b`."""
    if a[0] == NO_FIT:
        return False
    if b[0] == NO_FIT:
        return True
    if preference == PREEMPTION_OVER_BORROWING:
        if a[1] != b[1]:
            return a[1] < b[1]
        return a[0] > b[0]
    if a[0] != b[0]:
        return a[0] > b[0]
    return a[1] < b[1]


def should_try_next(outcome: Outcome, borrow_stops: bool, preempt_stops: bool) -> bool:
    """Whether the search goes on to the next flavor after this outcome."""
    mode, height = outcome
    if mode in (NO_FIT, NO_CANDIDATES):
        return True
    if mode in (PREEMPT, RECLAIM) and not preempt_stops:
        return True
    return height > 0 and not borrow_stops


def mode_text(mode: int) -> str:
    """The mode as Kueue's "Flavors considered" words it."""
    if mode == FIT:
        return "Fit"
    if mode == NO_FIT:
        return "NoFit"
    return "preemptionMode=" + _POSSIBILITY[mode]
