"""What `reconciler explain` answers, as data: `render.py` words it, `-o json` prints it."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ADMITTED", "BACKING_OFF", "DEACTIVATED", "STATES", "Explanation", "Holder", "QuotaRow"]

ADMITTED = "admitted"
PENDING = "pending"
STALLED = "stalled"
BACKING_OFF = "backing off"
DEACTIVATED = "deactivated"
FINISHED = "finished"
NOT_MANAGED = "not managed"
NO_WORKLOAD = "no Workload yet"
STATES = (ADMITTED, PENDING, STALLED, BACKING_OFF, DEACTIVATED, FINISHED, NOT_MANAGED, NO_WORKLOAD)


@dataclass(frozen=True, slots=True)
class QuotaRow:
    """One requested resource against one flavor of the ClusterQueue (amounts as quantities)."""

    pod_set: str
    resource: str
    flavor: str
    requested: str
    nominal: str
    in_use: str
    free: str
    fits: bool


@dataclass(frozen=True, slots=True)
class Holder:
    """An admitted workload holding quota the target needs."""

    workload: str  # namespace/name
    job: str | None  # namespace/name of the Job that owns it
    flavor: str
    resource: str
    amount: str

    @property
    def name(self) -> str:
        return f"Job {self.job}" if self.job else f"Workload {self.workload}"


@dataclass
class Explanation:
    subject: str  # "Job ns/name" or "Workload ns/name"
    state: str  # one of STATES
    summary: str  # one sentence in plain words
    workload: str | None = None
    # The MultiKueue manager that created the Workload (its kueue.x-k8s.io/multikueue-origin).
    origin: str | None = None
    local_queue: str | None = None
    cluster_queue: str | None = None
    # Admission fair sharing: the LocalQueue's score and place as the controller last wrote them.
    fair_sharing: str | None = None
    # Cohort fair sharing (the Configuration's fairSharing): the weighted shares compared at each
    # Cohort from the ClusterQueue up.
    cohort_shares: list[str] = field(default_factory=list)
    # The controller's own words: the Workload's conditions.
    controller_says: list[str] = field(default_factory=list)
    # Problems, each with its fix.
    findings: list[str] = field(default_factory=list)
    quota: list[QuotaRow] = field(default_factory=list)
    holders: list[Holder] = field(default_factory=list)
    # What would have to finish (or change) for it to fit.
    to_fit: list[str] = field(default_factory=list)
    ahead: list[str] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    pods: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    # Caveats about the answer itself (objects that could not be read, learned mappings).
    notes: list[str] = field(default_factory=list)
