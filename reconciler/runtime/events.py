"""Kubernetes Events about Jobs and Workloads, worded as Kueue words them."""

from __future__ import annotations

import msgspec

from reconciler.api import ObjectMeta

__all__ = ["COMPONENT", "event_body"]

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
