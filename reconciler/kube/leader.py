"""Leader election on a ``coordination.k8s.io/v1`` Lease, with client-go's behaviour.

- A replica takes the Lease when it is absent, released (no holder), held by
  itself, or expired. Expiry is judged on this process's monotonic clock only:
  the Lease is expired when its holder, renewTime and resourceVersion have not
  changed for ``leaseDurationSeconds`` *as observed here*. Wall clocks of
  different machines are never compared.
- Every write carries the resourceVersion it was decided on (optimistic
  concurrency): a 409 means another replica won this round.
- The leader renews every ``retry_period``. When no renewal has succeeded for
  ``renew_deadline`` (measured from the start of the last successful attempt),
  or another holder shows up in the Lease, leadership is lost:
  :meth:`LeaderElector.hold` raises :class:`LeadershipLost` and the caller must
  stop writing at once (the process exits).
- Every API call is bounded by a timeout (and by what is left of the renew
  deadline), so an API server that never answers cannot hang the elector.
- :meth:`LeaderElector.release` (clean shutdown) clears the holder and sets
  ``leaseDurationSeconds`` to 1, so a follower takes over without waiting.

Safety needs ``lease_duration > renew_deadline``: a follower waits at least
``lease_duration`` after the last renewal it saw, and the leader gives up
``renew_deadline`` after its last successful one.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import structlog

from reconciler.api.resources import LEASES
from reconciler.api.times import rfc3339_micro
from reconciler.kube.client import KubeClient
from reconciler.kube.errors import ApiError, Conflict, KubeError, NotFound

__all__ = ["ElectionConfig", "LeaderElector", "LeadershipLost", "LeaseRecord"]

log = structlog.get_logger(__name__)

# verb, resource, seconds, error code (None on success)
Observer = Callable[[str, str, float, str | None], None]
JITTER = 1.2  # client-go's JitterFactor (the renew deadline must exceed retry_period * (1 + ...))
OBSERVE_JITTER = 0.2  # a standby's looks at the Lease: observe_period * [1, 1 + OBSERVE_JITTER)
EXPIRY_MARGIN = 0.01  # woken this long after the observed expiry, so that it has passed


class LeadershipLost(Exception):  # noqa: N818 (it is an event, not a programming error)
    """This replica can no longer be sure it holds the Lease: stop writing now."""


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if self.retry_period <= 0:
            raise ValueError("retry period must be positive")
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("lease duration must be greater than the renew deadline")
        if self.renew_deadline <= JITTER * self.retry_period:
            raise ValueError(f"renew deadline must be greater than {JITTER} x the retry period")

    @property
    def observe_period(self) -> float:
        """How often a standby reads the Lease: a quarter retry period (at least 0.1 s)."""
        return max(0.1, self.retry_period / 4)

    @property
    def call_timeout(self) -> float:
        """The longest any single API call may take."""
        return max(0.2, min(self.renew_deadline / 2, self.lease_duration / 3))


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str
    lease_duration: float
    renew_time: str
    resource_version: str
    transitions: int


def _record(lease: dict[str, Any]) -> LeaseRecord:
    spec = lease.get("spec") or {}
    meta = lease.get("metadata") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        lease_duration=float(spec.get("leaseDurationSeconds") or 0),
        renew_time=str(spec.get("renewTime") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        transitions=int(spec.get("leaseTransitions") or 0),
    )


class LeaderElector:
    """One replica's view of the Lease. ``acquire()``, then ``hold()`` while leading, ``release()`` last."""

    def __init__(
        self,
        client: KubeClient,
        config: ElectionConfig,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        observe: Observer | None = None,
    ) -> None:
        self._client = client
        self.config = config
        self._monotonic = monotonic
        self._wall = wall_clock
        self._observe = observe
        self._path = LEASES.item_path(config.namespace, config.name)
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._lease: dict[str, Any] | None = None  # the last Lease read or written
        self.is_leader = False
        self._last_renewal = 0.0

    @property
    def leader(self) -> str | None:
        """The holder of the Lease as last observed (None when unknown or released)."""
        if self.is_leader:
            return self.config.identity
        return (self._observed.holder or None) if self._observed is not None else None

    def holds(self) -> bool:
        """Whether the Lease is surely still this replica's: it leads and its last successful renewal
        began less than ``renew_deadline`` ago on this process's monotonic clock (a follower waits
        ``lease_duration``, longer, before taking over). False in a leader that was paused (SIGSTOP,
        a frozen VM) past that: on waking it must not write before ``hold`` notices the loss."""
        return self.is_leader and self._monotonic() - self._last_renewal < self.config.renew_deadline

    # --- the loops -----------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Return once this replica holds the Lease (retrying every retry period, jittered)."""
        announced: str | None = None
        while True:
            if await self._try_acquire_or_renew(self.config.call_timeout):
                log.info("became leader", lease=self._path, identity=self.config.identity)
                return
            holder = self.leader
            if holder != announced:
                log.info("waiting for the lease", lease=self._path, leader=holder)
                announced = holder
            await asyncio.sleep(self.follower_wait(random.random()))

    def follower_wait(self, draw: float) -> float:
        """How long a follower sleeps before its next look at the Lease (`draw` in [0, 1)).

        It looks every quarter retry period (jittered by up to a fifth), not every jittered retry
        period as client-go does: expiry counts from when a renewal was *seen* here, so seeing
        it late delays the takeover by as much. And when the holder's lease would expire sooner,
        it wakes just then. With Kueue's defaults (15 s lease, 2 s retry) a standby takes over
        within about 0.6 s of the lease running out after the last renewal, where client-go's
        lags add up to 8.8 s. It costs a GET of one Lease every half second per standby."""
        wait = self.config.observe_period * (1 + draw * OBSERVE_JITTER)
        record = self._observed
        if record is not None and record.holder and record.holder != self.config.identity:
            expires_in = self._observed_at + record.lease_duration - self._monotonic()
            wait = min(wait, max(expires_in, 0.0) + EXPIRY_MARGIN)
        return wait

    async def hold(self) -> None:
        """Renew every retry period while leading; raises :class:`LeadershipLost` when that fails."""
        if not self.is_leader:
            raise LeadershipLost("not the leader")
        period, deadline = self.config.retry_period, self.config.renew_deadline
        while True:
            await asyncio.sleep(period)
            while True:
                left = self._last_renewal + deadline - self._monotonic()
                if left <= 0:
                    self.is_leader = False
                    raise LeadershipLost(f"the lease was not renewed within {deadline:g}s")
                if await self._try_acquire_or_renew(min(self.config.call_timeout, left)):
                    break
                if not self.is_leader:
                    raise LeadershipLost(f"the lease is held by {self.leader or 'nobody'} now")
                left = self._last_renewal + deadline - self._monotonic()
                await asyncio.sleep(max(0.0, min(period, left)))

    async def release(self) -> bool:
        """Give the Lease up (clean shutdown): no holder, a 1 s duration. True when released."""
        if not self.is_leader or self._lease is None:
            return False
        self.is_leader = False
        lease = self._lease
        try:
            try:
                await self._put_released(lease)
            except Conflict:
                # A renewal cancelled mid-flight may have landed after all: read the Lease
                # again and release it if it is still ours.
                lease = await self._call("get", "GET", None, self.config.call_timeout)
                if _record(lease).holder != self.config.identity:
                    return False
                await self._put_released(lease)
        except (KubeError, TimeoutError) as exc:
            log.warning("could not release the lease", lease=self._path, error=str(exc))
            return False
        log.info("released the lease", lease=self._path)
        return True

    async def _put_released(self, lease: dict[str, Any]) -> None:
        spec = dict(lease.get("spec") or {})
        now = rfc3339_micro(self._wall())
        spec.pop("holderIdentity", None)
        spec.update(leaseDurationSeconds=1, renewTime=now, acquireTime=now)
        await self._call("update", "PUT", {**lease, "spec": spec}, self.config.call_timeout)

    # --- one round -----------------------------------------------------------------------------

    async def _try_acquire_or_renew(self, timeout: float) -> bool:  # noqa: ASYNC109 (a per-round budget)
        started = self._monotonic()
        try:
            return await self._round(started, timeout)
        except (KubeError, TimeoutError) as exc:
            log.info("lease round failed", lease=self._path, error=f"{type(exc).__name__}: {exc}")
            return False

    async def _round(self, started: float, timeout: float) -> bool:  # noqa: ASYNC109
        me = self.config.identity
        now = rfc3339_micro(self._wall())
        duration = max(1, round(self.config.lease_duration))
        try:
            lease = await self._call("get", "GET", None, timeout)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": {
                    "holderIdentity": me,
                    "leaseDurationSeconds": duration,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": 0,
                },
            }
            try:
                created = await self._call("create", "POST", body, self._left(started, timeout))
            except Conflict:
                return False  # another replica created it first
            return self._won(created, started)
        record = _record(lease)
        self._note(record)
        if record.holder and record.holder != me:
            if self.is_leader:
                self.is_leader = False  # someone took it over: we are not the leader any more
                return False
            if self._observed_at + record.lease_duration > self._monotonic():
                return False  # held by another and not expired as observed here
        spec = dict(lease.get("spec") or {})
        if record.holder != me:
            spec.update(acquireTime=now, leaseTransitions=record.transitions + 1)
        spec.update(holderIdentity=me, leaseDurationSeconds=duration, renewTime=now)
        try:
            updated = await self._call("update", "PUT", {**lease, "spec": spec}, self._left(started, timeout))
        except Conflict:
            return False  # the Lease changed since we read it: someone else won
        return self._won(updated, started)

    def _won(self, lease: dict[str, Any], started: float) -> bool:
        self._lease = lease
        self._note(_record(lease))
        self._last_renewal = started  # conservative: the time the round began
        self.is_leader = True
        return True

    def _note(self, record: LeaseRecord) -> None:
        previous = self._observed
        if previous is None or (previous.holder, previous.renew_time, previous.resource_version) != (
            record.holder,
            record.renew_time,
            record.resource_version,
        ):
            self._observed = record
            self._observed_at = self._monotonic()

    def _left(self, started: float, timeout: float) -> float:
        left = started + timeout - self._monotonic()
        if left <= 0:
            raise TimeoutError("no time left in this round")
        return left

    async def _call(
        self,
        verb: str,
        method: str,
        body: dict[str, Any] | None,
        timeout: float,  # noqa: ASYNC109 (bounded twice: the HTTP timeout and asyncio.timeout)
    ) -> dict[str, Any]:
        path = self._path if method != "POST" else LEASES.list_path(self.config.namespace)
        sent = self._monotonic()
        code: str | None = None
        try:
            async with asyncio.timeout(timeout):
                raw = await self._client.request(
                    method,
                    path,
                    body=None if body is None else msgspec.json.encode(body),
                    timeout=timeout,
                )
        except ApiError as exc:
            code = str(exc.status)
            raise
        except (KubeError, TimeoutError):
            code = "transport"
            raise
        finally:
            if self._observe is not None:
                self._observe(verb, LEASES.plural, self._monotonic() - sent, code)
        decoded: dict[str, Any] = msgspec.json.decode(raw)
        return decoded
