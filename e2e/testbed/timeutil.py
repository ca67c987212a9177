"""Kubernetes time formats."""

from __future__ import annotations

import datetime as dt


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def rfc3339(at: dt.datetime | None = None) -> str:
    """metav1.Time: second precision, Z suffix."""
    return (at or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(at: dt.datetime | None = None) -> str:
    """metav1.MicroTime (used by Leases)."""
    return (at or now()).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str) -> dt.datetime:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
