"""The store's Job <-> Workload index and the own-write tracker, on their own."""

from __future__ import annotations

from reconciler.api import OwnerReference, Workload
from reconciler.integrations.batchjob import BATCH_JOB, job_workload_name, workload_for_job
from reconciler.runtime.shared.own_writes import OwnWrites
from reconciler.runtime.shared.store import Store
from tests.support.builders import job


def test_the_index_finds_a_jobs_workload_and_a_workloads_job() -> None:
    store = Store(integrations={"Job": BATCH_JOB})
    train = job("train", uid="u-1")
    store.put_job(("ns", "train"), train, "Job")
    wl_key = store.workload_key(train, "Job")
    assert wl_key == ("ns", job_workload_name("train", "u-1"))
    workload: Workload = workload_for_job(train)
    store.put_workload(wl_key, workload)
    assert store.job_key(wl_key) == ("ns", "train")


def test_a_recreated_job_gets_the_workload_of_its_new_uid() -> None:
    store = Store(integrations={"Job": BATCH_JOB})
    store.put_job(("ns", "train"), job("train", uid="u-1"), "Job")
    first = store.workload_key(store.of_kind("Job")[("ns", "train")], "Job")
    store.put_job(("ns", "train"), None, "Job")
    store.put_job(("ns", "train"), job("train", uid="u-2"), "Job")
    second = store.workload_key(store.of_kind("Job")[("ns", "train")], "Job")
    assert first != second
    assert second[1] == job_workload_name("train", "u-2")


def test_a_workload_without_a_controlling_job_has_no_owner() -> None:
    store = Store(integrations={"Job": BATCH_JOB})
    workload = workload_for_job(job("train", uid="u-1"))
    refs = [OwnerReference(api_version="batch/v1", kind="Job", name="train", uid="u-1", controller=False)]
    workload.metadata.owner_references = refs
    store.put_workload(("ns", workload.metadata.name), workload)
    assert store.job_key(("ns", workload.metadata.name)) is None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


KEY = ("ns", "w")


def test_events_older_than_our_applied_write_are_skipped_until_its_own_arrives() -> None:
    clock = Clock()
    writes: OwnWrites[tuple[str, str]] = OwnWrites(clock)
    writes.applied(KEY, "12", changed=True, for_seconds=5.0)
    assert writes.awaiting(KEY)
    assert not writes.accept_event(KEY, "11")  # older: skipped
    assert writes.accept_event(KEY, "12")  # its own event: events rule again
    assert not writes.awaiting(KEY)
    assert writes.accept_event(KEY, "11")


def test_an_await_that_never_sees_its_event_expires() -> None:
    clock = Clock()
    writes: OwnWrites[tuple[str, str]] = OwnWrites(clock)
    writes.applied(KEY, "12", changed=True, for_seconds=5.0)
    clock.now = 4.9
    assert writes.expired() == []
    clock.now = 5.0
    assert writes.expired() == [KEY]
    assert writes.accept_event(KEY, "11")


def test_a_relist_ends_every_await_even_unbounded_ones() -> None:
    writes: OwnWrites[tuple[str, str]] = OwnWrites(Clock())
    writes.applied(KEY, "12", changed=True)
    assert not writes.accept_event(KEY, "11")
    writes.relisted()
    assert writes.accept_event(KEY, "11")


def test_a_response_the_watch_already_delivered_is_stale() -> None:
    writes: OwnWrites[tuple[str, str]] = OwnWrites(Clock())
    writes.begin(KEY, "admit")
    assert writes.accept_event(KEY, "12")  # the watch brings our write first...
    assert writes.accept_event(KEY, "13")  # ...and a newer version
    assert writes.response_is_stale(KEY, "12")
    assert not writes.response_is_stale(KEY, "14")
    writes.end(KEY, "admit")
    assert not writes.in_flight(KEY)
    assert not writes.response_is_stale(KEY, "12")  # nothing in flight: nothing remembered


def test_writes_in_flight_are_counted_by_purpose() -> None:
    writes: OwnWrites[tuple[str, str]] = OwnWrites(Clock())
    writes.begin(KEY, "pods-ready")
    writes.begin(KEY, "pods-ready")  # one superseded behind the other: both complete
    writes.begin(KEY, "evict")
    assert writes.in_flight(KEY, "evict", "admit")
    assert not writes.in_flight(KEY, "admit")
    writes.end(KEY, "evict")
    writes.end(KEY, "pods-ready")
    assert writes.in_flight(KEY, "pods-ready")
    writes.end(KEY, "pods-ready")
    assert not writes.in_flight(KEY)


def test_an_unchanged_write_awaits_nothing() -> None:
    writes: OwnWrites[tuple[str, str]] = OwnWrites(Clock())
    writes.applied(KEY, "12", changed=False)
    assert not writes.awaiting(KEY)
