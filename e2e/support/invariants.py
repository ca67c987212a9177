"""A monitor that watches the quota invariants while a flood of Jobs runs.

:class:`InvariantMonitor`: a poller (lists Jobs then Workloads every ``interval``) and a Workload
watcher (every revision it delivers). Both check that for every ClusterQueue, flavor and resource
the ``resourceUsage`` of Workloads with QuotaReserved=True, an admission and not Finished stays
within the nominal quota; both feed a per-UID history (ordered by resourceVersion) that counts
admissions. The poller also checks that a Job seen unsuspended has an admitted Workload.
"""

from __future__ import annotations

import asyncio
import calendar
import contextlib
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from fractions import Fraction

from e2e.support.flood import TRANSIENT
from e2e.support.workloads import (
    KUEUE,
    QUEUE_LABEL,
    FlavorResource,
    condition,
    holds_quota,
    is_true,
    object_name,
    owner_uid,
    reserved,
    resource_version,
    usage_of,
)
from e2e.testbed import ApiError, KubeClient, api_path
from e2e.testbed.kubeclient import Obj


@dataclass
class _History:
    """One Workload's states in resourceVersion order, as far as the monitor saw them."""

    name: str
    last_rv: int = 0
    reserved: bool = False
    marker: tuple[str, str] | None = None  # (clusterQueue, QuotaReserved lastTransitionTime)
    admissions: list[str] = field(default_factory=list)


@dataclass
class InvariantMonitor:
    """Samples the API for over-commit and double admission while a scenario runs.

    ``async with monitor.running(kube): ...`` starts the poller and the watcher and cancels them on
    exit. Violations are collected, not raised: :meth:`assert_clean` reports them all at once.
    """

    quotas: dict[FlavorResource, Fraction]
    interval: float = 0.2
    jobs_every: int = 5  # Jobs are listed (before the Workloads) on every 5th poll
    violations: list[str] = field(default_factory=list)
    peaks: dict[FlavorResource, Fraction] = field(default_factory=lambda: defaultdict(Fraction))
    polls: int = 0
    poll_errors: int = 0
    watch_events: int = 0
    watch_breaks: int = 0
    relists: int = 0
    jobs: dict[str, Obj] = field(default_factory=dict)  # latest poll, by uid
    workloads: dict[str, Obj] = field(default_factory=dict)  # latest poll, by uid
    history: dict[str, _History] = field(default_factory=dict)
    _watched: dict[str, Obj] = field(default_factory=dict)
    _totals: dict[FlavorResource, Fraction] = field(default_factory=lambda: defaultdict(Fraction))
    _started: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # Job uid -> unsuspends
    _job_suspended: dict[str, bool] = field(default_factory=dict)
    _overcommits: list[tuple[float, list[Obj]]] = field(default_factory=list)
    _stopping: bool = False

    # --- what the scenario asks ------------------------------------------------------------------

    def admitted_count(self) -> int:
        return sum(1 for h in self.history.values() if h.admissions)

    def complete_jobs(self) -> int:
        return sum(1 for j in self.jobs.values() if is_true(j, "Complete"))

    def double_admissions(self) -> dict[str, list[str]]:
        return {h.name: h.admissions for h in self.history.values() if len(h.admissions) > 1}

    def jobs_started_twice(self) -> list[str]:
        """Jobs the poller saw unsuspended more than once (by name when known, else by uid)."""
        return [
            object_name(self.jobs[uid]) if uid in self.jobs else uid
            for uid, n in self._started.items()
            if n > 1
        ]

    def overcommit_samples(self) -> int:
        """Samples (polls, relists, watch revisions) in which some usage exceeded its quota."""
        return len(self._overcommits)

    def assert_clean(self) -> None:
        polled = [v for v in self.violations if v.startswith("poll")]
        watched = [v for v in self.violations if not v.startswith("poll")]
        problems = [*polled[:10], *watched[:10]]
        if len(self.violations) > len(problems):
            problems.append(
                f"... {len(self.violations)} in all ({len(polled)} from polls, {len(watched)} from the watch)"
            )
        for name, admissions in self.double_admissions().items():
            problems.append(f"Workload {name} admitted {len(admissions)} times: {admissions}")
        for uid, count in self._started.items():
            if count > 1:
                job = self.jobs.get(uid)
                problems.append(f"Job {object_name(job) if job else uid} unsuspended {count} times")
        problems.extend(self.overcommit_evidence())
        if self.polls == 0 or self.watch_events == 0:
            problems.append(f"the monitor saw nothing (polls {self.polls}, watch events {self.watch_events})")
        assert not problems, "invariants broken:\n" + "\n".join(problems)

    def summary(self) -> str:
        peaks = ", ".join(
            f"{cq}/{fl}/{res}={_fmt(self.peaks.get((cq, fl, res), Fraction(0)))}/{_fmt(q)}"
            for (cq, fl, res), q in sorted(self.quotas.items())
        )
        return (
            f"polls={self.polls} poll_errors={self.poll_errors} watch_events={self.watch_events} "
            f"watch_breaks={self.watch_breaks} relists={self.relists} admitted={self.admitted_count()} "
            f"peak/quota: {peaks}"
        )

    # --- running ---------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def running(self, kube: KubeClient) -> AsyncIterator[InvariantMonitor]:
        loop = asyncio.get_running_loop()
        tasks = [
            loop.create_task(self._poll_loop(kube), name="monitor-poll"),
            loop.create_task(self._watch_loop(kube), name="monitor-watch"),
        ]
        try:
            yield self
            # One last look at the final state.
            await asyncio.wait_for(self._poll_once(kube), timeout=30)
        finally:
            # Python 3.11's wait_for can swallow a cancellation that races its inner task, so the
            # loops also stop on this flag, and the wait for them is bounded.
            self._stopping = True
            for task in tasks:
                task.cancel()
            await asyncio.wait(tasks, timeout=30)
            results = [t.exception() if t.done() and not t.cancelled() else None for t in tasks]
        for result in results:
            if isinstance(result, BaseException) and not isinstance(result, asyncio.CancelledError):
                raise result

    async def _poll_loop(self, kube: KubeClient) -> None:
        while not self._stopping:
            began = time.monotonic()
            try:
                await asyncio.wait_for(self._poll_once(kube), timeout=15)
            except (TimeoutError, ApiError, *TRANSIENT):
                self.poll_errors += 1
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - began)))

    async def _poll_once(self, kube: KubeClient) -> None:
        # Jobs first: a Job seen unsuspended here was unsuspended before the Workload list below,
        # so its admission (written before the unsuspend) must show in that list.
        with_jobs = self.polls % self.jobs_every == 0
        jobs = (await kube.get(api_path("batch/v1", "jobs")))["items"] if with_jobs else []
        workloads = (await kube.get(api_path(KUEUE, "workloads")))["items"]
        self.polls += 1
        self.workloads = {w["metadata"]["uid"]: w for w in workloads}
        self._check_usage(workloads, f"poll {self.polls}")
        for workload in workloads:
            self._observe(workload)
        if not with_jobs:
            return
        self.jobs = {j["metadata"]["uid"]: j for j in jobs}
        by_owner = {owner_uid(w): w for w in workloads}
        for uid, job in self.jobs.items():
            suspended = bool(job["spec"].get("suspend"))
            if self._job_suspended.get(uid, True) and not suspended:
                self._started[uid] += 1
            self._job_suspended[uid] = suspended
            if QUEUE_LABEL not in job["metadata"].get("labels", {}) or suspended:
                continue
            workload = by_owner.get(uid)
            if workload is None or not reserved(workload):
                self.violations.append(
                    f"poll {self.polls}: Job {object_name(job)} is unsuspended but its Workload "
                    f"{object_name(workload) if workload else '(none)'} has no quota reserved"
                )

    async def _watch_loop(self, kube: KubeClient) -> None:
        path = api_path(KUEUE, "workloads")
        version: str | None = None
        while not self._stopping:
            try:
                if version is None:
                    listing = await asyncio.wait_for(kube.get(path), timeout=15)
                    self._watched = {}
                    self._totals = defaultdict(Fraction)
                    for workload in listing["items"]:
                        self._observe(workload)
                        self._charge(workload["metadata"]["uid"], workload)
                    self._check_usage(list(self._watched.values()), "relist")
                    version = str(listing["metadata"]["resourceVersion"])
                async for event in kube.watch(path, {"resourceVersion": version}, timeout_seconds=60):
                    obj: Obj = event["object"]
                    if event["type"] == "ERROR":
                        if obj.get("code") == 410:
                            self.relists += 1
                            version = None
                        break
                    version = str(obj["metadata"]["resourceVersion"])
                    if event["type"] == "BOOKMARK":
                        continue
                    self.watch_events += 1
                    uid = obj["metadata"]["uid"]
                    if event["type"] == "DELETED":
                        self._charge(uid, None)
                        continue
                    self._observe(obj)
                    # After this event the totals are those of the collection at this revision.
                    charged = self._charge(uid, obj)
                    if any(self._totals[k] > self.quotas.get(k, self._totals[k]) for k in charged):
                        self._check_usage(list(self._watched.values()), f"revision {version}")
            except ApiError as err:
                if err.status == 410:
                    self.relists += 1
                    version = None
                else:
                    self.watch_breaks += 1
                    await asyncio.sleep(0.5)
            except (TimeoutError, ValueError, *TRANSIENT):
                self.watch_breaks += 1
                await asyncio.sleep(0.5)

    def _charge(self, uid: str, workload: Obj | None) -> dict[FlavorResource, Fraction]:
        """Keep the watcher's per-resource totals of Workloads holding quota; what ``uid`` charges now."""
        previous = self._watched.pop(uid, None)
        if previous is not None and holds_quota(previous):
            for key, amount in usage_of(previous).items():
                self._totals[key] -= amount
        if workload is None:
            return {}
        self._watched[uid] = workload
        if not holds_quota(workload):
            return {}
        charged = usage_of(workload)
        for key, amount in charged.items():
            self._totals[key] += amount
            self.peaks[key] = max(self.peaks[key], self._totals[key])
        return charged

    def _check_usage(self, workloads: list[Obj], when: str) -> None:
        totals: dict[FlavorResource, Fraction] = defaultdict(Fraction)
        holders: dict[str, list[str]] = defaultdict(list)
        for workload in workloads:
            if not holds_quota(workload):
                continue
            for key, amount in usage_of(workload).items():
                totals[key] += amount
            holders[workload["status"]["admission"]["clusterQueue"]].append(self._holder(workload))
        for key, total in totals.items():
            self.peaks[key] = max(self.peaks[key], total)
            quota = self.quotas.get(key)
            if quota is None:
                if key[0] in {k[0] for k in self.quotas}:
                    self.violations.append(f"{when}: usage of {key} which has no quota: {_fmt(total)}")
                continue
            if total > quota:
                self.violations.append(
                    f"{when}: {key[0]} flavor {key[1]} {key[2]} usage {_fmt(total)} > quota {_fmt(quota)} "
                    f"(holding: {sorted(holders[key[0]])})"
                )
                self._overcommits.append((time.time(), [w for w in workloads if holds_quota(w)]))

    def _holder(self, workload: Obj) -> str:
        """The Workload's name, with its Job's state as the latest poll saw it when the Job has ended."""
        name = str(workload["metadata"]["name"])
        job = self.jobs.get(owner_uid(workload) or "")
        if job is not None and (is_true(job, "Complete") or is_true(job, "Failed")):
            return f"{name} (Job Complete)"
        return name

    def overcommit_evidence(self) -> list[str]:
        """For each over-commit seen (first 10): the holders whose Job had completed by then (the Job's
        ``status.completionTime`` is in whole seconds, so "by then" means at most 1 s later): quota still
        charged in the API by a Workload whose Job is over, while another was admitted in its place."""
        lines: list[str] = []
        for seen_at, holding in self._overcommits[:10]:
            done = []
            for workload in holding:
                job = self.jobs.get(owner_uid(workload) or "")
                completed = (job or {}).get("status", {}).get("completionTime")
                if completed and _epoch(completed) <= seen_at:
                    done.append(f"{workload['metadata']['name']} (Job completionTime {completed})")
            stamp = time.strftime("%H:%M:%S", time.gmtime(seen_at))
            lines.append(f"over-commit seen at {stamp}Z: {len(holding)} holding; Jobs already over: {done}")
        return lines

    def _observe(self, workload: Obj) -> None:
        uid = workload["metadata"]["uid"]
        rv = resource_version(workload)
        history = self.history.setdefault(uid, _History(object_name(workload)))
        if rv <= history.last_rv:
            return  # older than what we have seen (the poller and the watcher race)
        history.last_rv = rv
        now_reserved = reserved(workload)
        marker: tuple[str, str] | None = None
        if now_reserved:
            qr = condition(workload, "QuotaReserved") or {}
            marker = (workload["status"]["admission"]["clusterQueue"], str(qr.get("lastTransitionTime")))
            if not history.reserved or marker != history.marker:
                history.admissions.append(f"rv {rv}: {marker[0]} at {marker[1]}")
        history.reserved = now_reserved
        history.marker = marker


def _epoch(stamp: str) -> float:
    return calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ"))


def _fmt(amount: Fraction) -> str:
    return str(amount.numerator) if amount.denominator == 1 else f"{float(amount):g}"
