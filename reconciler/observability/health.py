"""Liveness and readiness, decided from plain state the runtime keeps up to date.

``/healthz`` (liveness) answers 200 when the process is alive: the event loop
answered (the probe runs on it), every watch has heard from the API server
recently and the reconciler is not stuck on its inbox. A watch is stale when
for longer than ``stale_after`` (twice its inactivity timeout) it has received
no line (event or bookmark), finished no list and had no watch request
accepted: the first missed deadline makes the informer reconnect by itself,
and a quiet collection whose watch is accepted again is not a dead one; only
an API server that stops answering is worth a restart. A follower runs no
watches and is alive when it answers.

``/readyz`` (readiness):

- leader or standalone: 200 once every watch has synced and the ledger has
  been rebuilt from the API, 503 with the reason before that;
- follower: 200, body ``standing by: not the leader (leader is <identity>)``.
- any role: 503 while the admission webhook server, when there is one, does not serve yet
  (waiting for its certificate): the webhook Service must only route to replicas that answer.
  A follower is healthy and ready to take over, and the metrics Service
  selects every replica; readiness does not route any decision-making
  traffic, so marking followers unready would only make rollouts stall.

Every answer carries ``X-Replica-Role`` (leader, follower or standalone), and
its body says the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from .metrics import ReplicaRole

__all__ = ["ControllerState", "Health", "Verdict", "WatchState"]


@dataclass(frozen=True, slots=True)
class WatchState:
    name: str
    synced: bool
    idle_seconds: float  # since the last line, list or accepted watch request
    stale_after: float


@dataclass(frozen=True, slots=True)
class ControllerState:
    watches: list[WatchState]
    ledger_rebuilt: bool
    stalled: str | None = None  # why the reconciler looks stuck, if it does


@dataclass(frozen=True, slots=True)
class Verdict:
    status: int
    body: str
    role: ReplicaRole


@dataclass
class Health:
    """What the probes report; the runtime sets ``role``, ``leader`` and ``controller``."""

    role: ReplicaRole = "standalone"
    identity: str = ""
    # The holder of the Lease as last observed (followers); None when not known.
    leader: Callable[[], str | None] = field(default=lambda: None)
    # The running controller's state; None while no controller runs (followers, start-up).
    controller: Callable[[], ControllerState] | None = None
    stopping: bool = False  # shutting down: not ready, whatever the role
    # Why the admission webhook server does not serve (None when it does); None: no webhooks.
    webhook: Callable[[], str | None] | None = None

    def liveness(self) -> Verdict:
        if self.controller is None:
            detail = "no watches running" if self.role == "follower" else "controller starting"
            return Verdict(200, f"ok: {self.role}, {detail}", self.role)
        state = self.controller()
        problems = [
            f"watch {w.name}: no line for {w.idle_seconds:.0f}s (limit {w.stale_after:.0f}s)"
            for w in state.watches
            if w.idle_seconds > w.stale_after
        ]
        if state.stalled is not None:
            problems.append(f"reconciler: {state.stalled}")
        if problems:
            return Verdict(500, f"unhealthy ({self.role}):\n" + "\n".join(problems), self.role)
        return Verdict(200, f"ok: {self.role}, {len(state.watches)} watches active", self.role)

    def readiness(self) -> Verdict:
        if self.stopping:
            return Verdict(503, f"not ready: {self.role}, shutting down", self.role)
        waiting = self.webhook() if self.webhook is not None else None
        if waiting is not None:
            return Verdict(503, f"not ready: {self.role}, {waiting}", self.role)
        if self.role == "follower":
            # Between winning the Lease and acting as leader it is still a follower, and does not
            # stand by for itself.
            leader = self.leader()
            if not leader or leader == self.identity:
                leader = "unknown"
            return Verdict(200, f"standing by: not the leader (leader is {leader})", self.role)
        if self.controller is None:
            return Verdict(503, f"not ready: {self.role}, controller starting", self.role)
        state = self.controller()
        unsynced = [w.name for w in state.watches if not w.synced]
        if unsynced:
            return Verdict(
                503, f"not ready: {self.role}, waiting for watches to sync: {', '.join(unsynced)}", self.role
            )
        if not state.ledger_rebuilt:
            return Verdict(503, f"not ready: {self.role}, ledger not rebuilt yet", self.role)
        return Verdict(200, f"ok: {self.role}, all watches synced, ledger rebuilt", self.role)
