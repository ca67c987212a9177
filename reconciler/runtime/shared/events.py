"""Kubernetes Events about Jobs and Workloads, worded as Kueue words them."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import msgspec
import structlog

from reconciler.api import ObjectMeta
from reconciler.api.resources import EVENTS
from reconciler.runtime.shared.actions import MergePatch, PostEvent, WriteDone
from reconciler.runtime.shared.event_series import EventSeries, SeriesKey, Tally

__all__ = ["COMPONENT", "WORKLOAD_API", "EventRecorder", "event_body"]

log = structlog.get_logger(__name__)

COMPONENT = "dra-quota-reconciler"
MAX_EVENT_MESSAGE = 1024


def _truncate(message: str) -> str:
    if len(message) <= MAX_EVENT_MESSAGE:
        return message
    return message[: MAX_EVENT_MESSAGE - 4] + " ..."


def event_body(
    *,
    api_version: str,
    kind: str,
    meta: ObjectMeta,
    event_type: str,
    reason: str,
    message: str,
    now: str,
    instance: str,
) -> bytes:
    """A core/v1 Event for an object (generateName, so repeats never collide)."""
    return msgspec.json.encode(
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{meta.name}.", "namespace": meta.namespace},
            "involvedObject": {
                "apiVersion": api_version,
                "kind": kind,
                "name": meta.name,
                "namespace": meta.namespace,
                "uid": meta.uid,
            },
            "type": event_type,
            "reason": reason,
            "message": _truncate(message),
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "reportingInstance": instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }
    )


WORKLOAD_API = "kueue.x-k8s.io/v1beta2"


@dataclass
class EventRecorder:
    """Posts Events about jobs and Workloads (fire and forget: a lost Event is only logged);
    a repeat of one posted within six minutes is counted on it instead (event_series)."""

    submit: Callable[[PostEvent | MergePatch], None]
    clock: Callable[[], str]
    instance: str
    monotonic: Callable[[], float] = time.monotonic
    # The jobs' projections -> the (apiVersion, kind) an Event names (the context adds every
    # enabled integration's); anything else is a Workload.
    kinds: dict[type[Any], tuple[str, str]] = field(default_factory=dict)
    series: EventSeries = field(default_factory=EventSeries)

    def emit(self, obj: Any, event_type: str, reason: str, message: str) -> None:
        """An Event about a Workload or a job (of a kind in `kinds`)."""
        api_version, kind = self.kinds.get(type(obj), (WORKLOAD_API, "Workload"))
        # A job that stands for part of an object (a group of a set) names that object.
        meta = getattr(obj, "event_meta", obj.metadata)
        # The object's resourceVersion too, as the object reference client-go keys its series
        # on: a repeat about an object that changed meanwhile is an Event of its own. And the
        # message: a new one is posted (client-go would count it on the first, message unseen).
        version = meta.resource_version or ""
        key = (meta.namespace, kind, meta.name, meta.uid, version, event_type, reason, message)
        now = self.clock()
        occurrence = self.series.seen(key, self.monotonic(), now)
        if occurrence.write_count is not None:
            self._write_count(key, occurrence.write_count)
        if not occurrence.post:
            return
        body = event_body(
            api_version=api_version,
            kind=kind,
            meta=meta,
            event_type=event_type,
            reason=reason,
            message=message,
            now=now,
            instance=self.instance,
        )
        on_done = partial(self._posted, key)
        self.submit(PostEvent("event", EVENTS, obj.metadata.namespace, body, on_done=on_done))

    def tick(self) -> None:
        """Write the counts of the series that ended or ran long (on the reconciler's tick)."""
        for key, tally in self.series.due(self.monotonic()):
            self._write_count(key, tally)

    def _posted(self, key: SeriesKey, done: WriteDone) -> None:
        name = None
        if done.ok and done.body is not None:
            name = msgspec.json.decode(done.body, type=_Posted).metadata.name or None
        elif done.error is not None:
            log.debug("event not recorded", error=str(done.error))
        tally = self.series.posted(key, name)
        if tally is not None:
            self._write_count(key, tally)

    def _write_count(self, key: SeriesKey, tally: Tally) -> None:
        if tally.name is None:
            return
        count = tally.count
        body = msgspec.json.encode({"count": count, "lastTimestamp": tally.last_stamp})

        def done(result: WriteDone) -> None:
            self.series.written(key, tally, count, self.monotonic(), result.ok)

        self.submit(MergePatch("event-series", EVENTS, key[0], tally.name, body, on_done=done))


class _PostedMeta(msgspec.Struct):
    name: str = ""


class _Posted(msgspec.Struct):
    metadata: _PostedMeta = msgspec.field(default_factory=_PostedMeta)
