"""Kubernetes Events about Jobs and Workloads, worded as Kueue words them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import structlog

from reconciler.api import Job, ObjectMeta
from reconciler.api.resources import EVENTS

from .actions import PostEvent, WriteDone

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
    """Posts Events about jobs and Workloads (fire and forget: a lost Event is only logged)."""

    submit: Callable[[PostEvent], None]
    clock: Callable[[], str]
    instance: str
    # The jobs' projections -> the (apiVersion, kind) an Event names (the context adds every
    # enabled integration's); anything else is a Workload.
    kinds: dict[type[Any], tuple[str, str]] = field(default_factory=lambda: {Job: ("batch/v1", "Job")})

    def emit(self, obj: Any, event_type: str, reason: str, message: str) -> None:
        """An Event about a Workload or a job (of a kind in `kinds`)."""
        api_version, kind = self.kinds.get(type(obj), (WORKLOAD_API, "Workload"))
        body = event_body(
            api_version=api_version,
            kind=kind,
            # A job that stands for part of an object (a LeaderWorkerSet's group) names that object.
            meta=getattr(obj, "event_meta", obj.metadata),
            event_type=event_type,
            reason=reason,
            message=message,
            now=self.clock(),
            instance=self.instance,
        )
        self.submit(PostEvent("event", EVENTS, obj.metadata.namespace, body, on_done=_event_done))


def _event_done(done: WriteDone) -> None:
    if done.error is not None:
        log.debug("event not recorded", error=str(done.error))
