"""Repeated Events are counted on the one posted, as Kueue's recorder (client-go's events API) does:
one POST, the count written at the second occurrence and when the series ends, never a POST per
repeat."""

from __future__ import annotations

import msgspec

from reconciler.api import ObjectMeta, Workload
from reconciler.kube import NotFound
from reconciler.runtime.shared.actions import MergePatch, PostEvent, WriteDone
from reconciler.runtime.shared.event_series import FINISH_SECONDS, REFRESH_SECONDS
from reconciler.runtime.shared.events import EventRecorder


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def stamp(self) -> str:
        return f"t{self.now:.0f}"


def recorder() -> tuple[EventRecorder, list[PostEvent | MergePatch], Clock]:
    sent: list[PostEvent | MergePatch] = []
    clock = Clock()
    return EventRecorder(sent.append, clock.stamp, "test", lambda: clock.now), sent, clock


def workload(name: str = "wl", version: str = "7") -> Workload:
    return Workload(
        metadata=ObjectMeta(name=name, namespace="ns", uid=f"uid-{name}", resource_version=version)
    )


def land(action: PostEvent | MergePatch, name: str = "wl.abc") -> None:
    assert action.on_done is not None
    action.on_done(WriteDone(action, body=msgspec.json.encode({"metadata": {"name": name}})))


def test_repeats_post_once_and_count_on_the_posted_event() -> None:
    events, sent, clock = recorder()
    wl = workload()
    events.emit(wl, "Warning", "Pending", "1 more needed")
    (post,) = sent
    assert isinstance(post, PostEvent)
    land(post)
    for _ in range(2, 6):
        clock.now += 10
        events.emit(wl, "Warning", "Pending", "1 more needed")
    # The second occurrence writes count 2 on the posted Event; the later ones are only counted.
    assert len(sent) == 2
    patch = sent[1]
    assert isinstance(patch, MergePatch)
    assert patch.name == "wl.abc"
    assert patch.purpose == "event-series"
    assert msgspec.json.decode(patch.patch) == {"count": 2, "lastTimestamp": "t1010"}
    land(patch)
    events.tick()
    assert len(sent) == 2  # still running: nothing to write
    # Six minutes without a repeat: the series ends with its final count written.
    clock.now += FINISH_SECONDS + 1
    events.tick()
    final = sent[2]
    assert isinstance(final, MergePatch)
    assert msgspec.json.decode(final.patch) == {"count": 5, "lastTimestamp": "t1040"}
    # After the end a repeat is a new Event.
    events.emit(wl, "Warning", "Pending", "1 more needed")
    assert isinstance(sent[3], PostEvent)


def test_a_repeat_while_the_post_is_in_flight_is_written_when_it_lands() -> None:
    events, sent, _clock = recorder()
    wl = workload()
    events.emit(wl, "Normal", "Started", "a")
    events.emit(wl, "Normal", "Started", "a")
    events.emit(wl, "Normal", "Started", "a")
    assert len(sent) == 1
    land(sent[0])
    (patch,) = sent[1:]
    assert isinstance(patch, MergePatch)
    assert msgspec.json.decode(patch.patch)["count"] == 3


def test_other_reasons_types_and_objects_are_their_own_series() -> None:
    events, sent, _ = recorder()
    events.emit(workload("a"), "Warning", "Pending", "m")
    events.emit(workload("a"), "Normal", "QuotaReserved", "m")
    events.emit(workload("a"), "Normal", "Pending", "m")
    events.emit(workload("b"), "Warning", "Pending", "m")
    # The object changed since (its resourceVersion): client-go's series key has it.
    events.emit(workload("a", version="8"), "Warning", "Pending", "m")
    # A new message is posted (the first Event would not show it).
    events.emit(workload("a", version="8"), "Warning", "Pending", "m2")
    assert [type(a) for a in sent] == [PostEvent] * 6


def test_a_failed_post_or_count_write_starts_afresh() -> None:
    events, sent, _ = recorder()
    wl = workload()
    events.emit(wl, "Warning", "Pending", "m")
    post = sent[0]
    assert post.on_done is not None
    post.on_done(WriteDone(post, error=NotFound(404, "NotFound", "namespace gone")))
    events.emit(wl, "Warning", "Pending", "m")
    assert isinstance(sent[1], PostEvent)
    land(sent[1])
    events.emit(wl, "Warning", "Pending", "m")
    patch = sent[2]
    assert isinstance(patch, MergePatch)
    assert patch.on_done is not None
    patch.on_done(WriteDone(patch, error=NotFound(404, "NotFound", "the Event expired")))
    events.emit(wl, "Warning", "Pending", "m")
    assert isinstance(sent[3], PostEvent)


def test_a_long_series_has_its_count_written_every_thirty_minutes() -> None:
    events, sent, clock = recorder()
    wl = workload()
    events.emit(wl, "Warning", "Pending", "m")
    land(sent[0])
    start = clock.now
    while clock.now - start < REFRESH_SECONDS + 60:
        clock.now += 60
        events.emit(wl, "Warning", "Pending", "m")
        events.tick()
    counts = [msgspec.json.decode(a.patch)["count"] for a in sent if isinstance(a, MergePatch)]
    assert counts[0] == 2
    assert len(counts) == 2
    assert counts[1] > 25
