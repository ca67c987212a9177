"""Admission Fair Sharing (Kueue's AFS): the decayed usage of each LocalQueue and its score.

Kueue v0.18.1 orders the workloads of a ClusterQueue with
``spec.admissionScope.admissionMode: UsageBasedAdmissionFairSharing`` by the historical usage of
their LocalQueues first (lowest first), then by its usual order (priority, then the queue-order
timestamp). Per LocalQueue it keeps:

- the *consumed* resources, an exponential moving average of the resources its admitted
  workloads use, sampled every ``usageSamplingInterval``:
  ``new = old * (1 - a) + admitted_now * a`` with ``a = 1 - 0.5 ** (elapsed / usageHalfLifeTime)``
  (a half-life of 0 resets it to nothing at every sample);
- the *entry penalties* of workloads admitted since: each admission adds its requests times
  ``a(usageSamplingInterval)`` at once, so a burst from one LocalQueue is paid for before the
  next sample; when the admission is written (Kueue: when the Workload is Admitted) the usage is
  decayed up to now with the admitted workloads, the penalty is folded in and leaves the
  pending penalties.

Its score is ``sum(resourceWeights[r] (default 1) * (consumed + penalties)[r]) / weight``, with
the LocalQueue's ``spec.fairSharing.weight`` (default 1), in the resources' units (cpu in
cores). Amounts are kept in milli-units and scaled with truncation, as Kueue's resource lists.

Pure: every time is given by the caller, in seconds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "AdmissionFairSharing",
    "AfsSettings",
    "LocalQueueUsage",
    "alpha",
    "decayed",
    "entry_penalty",
    "order_key",
    "to_milli",
    "weighted_usage",
]

LocalQueueKey = tuple[str, str]
WorkloadKey = tuple[str, str]
Milli = dict[str, int]


def alpha(elapsed: float, half_life: float) -> float:
    """The weight of the new sample after `elapsed` seconds: 1 - 0.5^(elapsed / half-life); 0
    for a half-life of 0, as Kueue's."""
    if half_life == 0:
        return 0.0
    return 1.0 - math.pow(0.5, elapsed / half_life)


def _scaled(usage: Mapping[str, int], factor: float) -> Milli:
    # Kueue keeps every resource and truncates the scaled milli-value towards zero.
    return {name: int(amount * factor) for name, amount in usage.items()}


def _summed(a: Mapping[str, int], b: Mapping[str, int]) -> Milli:
    out = dict(a)
    for name, amount in b.items():
        out[name] = out.get(name, 0) + amount
    return out


def decayed(old: Mapping[str, int], current: Mapping[str, int], elapsed: float, half_life: float) -> Milli:
    """The moving average after `elapsed` seconds with `current` as the new sample."""
    a = alpha(elapsed, half_life)
    return _summed(_scaled(old, 1.0 - a), _scaled(current, a))


def entry_penalty(requests: Mapping[str, int], sampling: float, half_life: float) -> Milli:
    """What an admission adds at once: its requests times a(usageSamplingInterval)."""
    return _scaled(requests, alpha(sampling, half_life))


def to_milli(usage: Mapping[tuple[str, str], int]) -> Milli:
    """Charged amounts by (flavor, resource) (cpu in millicores, the rest in units) as milli-units
    by resource, the flavors summed (Kueue's flattened flavor usage)."""
    out: Milli = {}
    for (_flavor, name), amount in usage.items():
        out[name] = out.get(name, 0) + (amount if name == "cpu" else amount * 1000)
    return out


def weighted_usage(
    consumed: Mapping[str, int],
    penalty: Mapping[str, int],
    weight: float,
    resource_weights: Mapping[str, float],
) -> float:
    """The score: weighted consumed and pending usage over the LocalQueue's weight. A weight of 0
    divides as Go's floats do: +inf for any usage, NaN for none."""
    total = _summed(consumed, penalty)
    usage = 0.0
    for name in sorted(total):
        usage += resource_weights.get(name, 1.0) * (total[name] / 1000)
    if weight == 0:
        return math.nan if usage == 0 else math.copysign(math.inf, usage)
    return usage / weight


def order_key(score: float) -> float:
    """A score as a sort key with Go's cmp.Compare order (NaN before everything)."""
    return -math.inf if math.isnan(score) else score


@dataclass(frozen=True)
class AfsSettings:
    """The Configuration's admissionFairSharing, in seconds."""

    half_life: float = 0.0
    sampling: float = 300.0
    resource_weights: Mapping[str, float] = field(default_factory=dict)


@dataclass
class LocalQueueUsage:
    consumed: Milli
    last_update: float


@dataclass(frozen=True, slots=True)
class _Penalty:
    local_queue: LocalQueueKey
    amounts: Milli


@dataclass
class AdmissionFairSharing:
    settings: AfsSettings
    usage: dict[LocalQueueKey, LocalQueueUsage] = field(default_factory=dict)
    weights: dict[LocalQueueKey, float] = field(default_factory=dict)
    # Entry penalties of admissions not written yet, by workload, and their sum by LocalQueue.
    _pending: dict[WorkloadKey, _Penalty] = field(default_factory=dict)
    _penalties: dict[LocalQueueKey, Milli] = field(default_factory=dict)
    # Scores computed since the LocalQueue last changed (the queues read them on every head).
    _scores: dict[LocalQueueKey, float] = field(default_factory=dict)

    # --- LocalQueues --------------------------------------------------------------------

    def set_weight(self, local_queue: LocalQueueKey, weight: float) -> bool:
        """spec.fairSharing.weight; True when it changed the score."""
        if self.weights.get(local_queue, 1.0) == weight:
            return False
        self.weights[local_queue] = weight
        self._scores.pop(local_queue, None)
        return True

    def forget(self, local_queue: LocalQueueKey) -> None:
        """The LocalQueue is gone: its usage and pending penalties with it, as in Kueue."""
        self.usage.pop(local_queue, None)
        self.weights.pop(local_queue, None)
        self._penalties.pop(local_queue, None)
        self._scores.pop(local_queue, None)
        for key in [k for k, p in self._pending.items() if p.local_queue == local_queue]:
            del self._pending[key]

    def seed(self, local_queue: LocalQueueKey, consumed: Mapping[str, int], now: float) -> bool:
        """Start from what the LocalQueue's status shows (a restart), once: Kueue seeds from the
        persisted consumedResources with lastUpdate now. False when it was known already."""
        if local_queue in self.usage:
            return False
        self.usage[local_queue] = LocalQueueUsage(dict(consumed), now)
        self._scores.pop(local_queue, None)
        return True

    def due(self, local_queue: LocalQueueKey, now: float) -> bool:
        """A sample is due: never sampled, or usageSamplingInterval passed since the last update."""
        entry = self.usage.get(local_queue)
        return entry is None or now - entry.last_update >= self.settings.sampling

    def next_sample(self, local_queue: LocalQueueKey) -> float | None:
        entry = self.usage.get(local_queue)
        return None if entry is None else entry.last_update + self.settings.sampling

    def sample(self, local_queue: LocalQueueKey, admitted: Mapping[str, int], now: float) -> Milli:
        """Decay the usage up to `now` with what the LocalQueue's admitted workloads use (milli).
        A LocalQueue never seen starts empty at `now` (its first sample folds in nothing)."""
        entry = self.usage.setdefault(local_queue, LocalQueueUsage({}, now))
        half_life = self.settings.half_life
        if half_life == 0:
            entry.consumed = {}
        else:
            elapsed = max(0.0, now - entry.last_update)
            entry.consumed = decayed(entry.consumed, admitted, elapsed, half_life)
        entry.last_update = now
        self._scores.pop(local_queue, None)
        return entry.consumed

    # --- admissions ---------------------------------------------------------------------

    def admitted(self, key: WorkloadKey, local_queue: LocalQueueKey, requests: Mapping[str, int]) -> None:
        """The scheduler admitted a workload (requests in milli): its entry penalty counts now."""
        settings = self.settings
        self.lost(key)  # a penalty still pending for it is replaced
        amounts = entry_penalty(requests, settings.sampling, settings.half_life)
        self._pending[key] = _Penalty(local_queue, amounts)
        self._add_penalty(local_queue, amounts, 1)

    def written(self, key: WorkloadKey, admitted: Mapping[str, int], now: float) -> LocalQueueKey | None:
        """Its admission was written: the usage is decayed up to now with the LocalQueue's admitted
        workloads and the penalty folded in (Kueue's workload controller on Admitted). Returns the
        LocalQueue, None when no penalty was pending."""
        penalty = self._pending.pop(key, None)
        if penalty is None:
            return None
        self._add_penalty(penalty.local_queue, penalty.amounts, -1)
        entry = self.usage.setdefault(penalty.local_queue, LocalQueueUsage({}, now))
        elapsed = max(0.0, now - entry.last_update)
        consumed = decayed(entry.consumed, admitted, elapsed, self.settings.half_life)
        entry.consumed = _summed(consumed, penalty.amounts)
        entry.last_update = now
        self._scores.pop(penalty.local_queue, None)
        return penalty.local_queue

    def lost(self, key: WorkloadKey) -> LocalQueueKey | None:
        """Its admission was not written: the penalty goes (Kueue's scheduler subtracts it)."""
        penalty = self._pending.pop(key, None)
        if penalty is None:
            return None
        self._add_penalty(penalty.local_queue, penalty.amounts, -1)
        return penalty.local_queue

    def penalty(self, local_queue: LocalQueueKey) -> Milli:
        """The entry penalties of the LocalQueue's admissions not written yet, summed."""
        return dict(self._penalties.get(local_queue, {}))

    def _add_penalty(self, local_queue: LocalQueueKey, amounts: Mapping[str, int], sign: int) -> None:
        total = self._penalties.setdefault(local_queue, {})
        for name, amount in amounts.items():
            left = total.get(name, 0) + sign * amount
            if left:
                total[name] = left
            else:
                total.pop(name, None)
        if not total:
            del self._penalties[local_queue]
        self._scores.pop(local_queue, None)

    # --- the score ----------------------------------------------------------------------

    def score(self, local_queue: LocalQueueKey) -> float:
        cached = self._scores.get(local_queue)
        if cached is not None:
            return cached
        entry = self.usage.get(local_queue)
        consumed = entry.consumed if entry is not None else {}
        weight = self.weights.get(local_queue, 1.0)
        penalty = self._penalties.get(local_queue, {})
        score = weighted_usage(consumed, penalty, weight, self.settings.resource_weights)
        self._scores[local_queue] = score
        return score
