"""RFC 3339 times as the API writes them, and seconds since the epoch."""

from __future__ import annotations

import datetime as dt

__all__ = ["epoch", "now_rfc3339", "rfc3339", "rfc3339_micro"]


# The last second formatted and its text: asked for on every condition and Event written, the
# same second is formatted once.
_last_second: list[tuple[int, str]] = [(-1, "")]


def now_rfc3339() -> str:
    """Now, to the second, as Kubernetes writes condition and event times."""
    now = dt.datetime.now(dt.UTC)
    second = int(now.timestamp())
    last = _last_second[0]
    if last[0] != second:
        last = (second, now.strftime("%Y-%m-%dT%H:%M:%SZ"))
        _last_second[0] = last
    return last[1]


def rfc3339(seconds: float) -> str:
    """Seconds since the epoch as an RFC 3339 time to the second."""
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_micro(moment: dt.datetime) -> str:
    """A MicroTime (Lease renewTime, Event eventTime)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def epoch(stamp: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 time, None when absent or unreadable."""
    if not stamp:
        return None
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
