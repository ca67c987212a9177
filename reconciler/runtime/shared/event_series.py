"""Repeated Events folded into one, as the recorder of Kueue v0.18.1 (client-go's events API) does.

An Event about an object with the type, reason and message of one already posted within the last
six minutes, the object unchanged since (the same resourceVersion: client-go keys a series on the
object reference, which carries it), is not posted again: the second occurrence writes the count
on the one posted, and later ones only count here. (client-go leaves the message out of its key
and so would count a new message on the first Event, unseen: a new message is posted here.)
The count is written again when the series ends (six minutes without a repeat) or has run for
thirty minutes since it was last written. So an object told the same again and again, unchanged,
shows one Event "(xN over ...)" instead of N Events, and the API server gets at most two writes
per series in six minutes.

`EventSeries` keeps the bookkeeping (plain data, no I/O); `EventRecorder` does the writes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FINISH_SECONDS", "REFRESH_SECONDS", "EventSeries", "Occurrence", "SeriesKey", "Tally"]

# A series ends after this long without a repeat (client-go's finishTime).
FINISH_SECONDS = 6 * 60.0
# A running series has its count written at least this often (client-go's refreshTime).
REFRESH_SECONDS = 30 * 60.0
# How often the ended series are looked for (a sweep is a pass over all of them).
SWEEP_SECONDS = 30.0

# (namespace, involved object's kind, name, uid, resourceVersion, event type, reason, message)
SeriesKey = tuple[str, str, str, str, str, str, str, str]


@dataclass(slots=True)
class Tally:
    name: str | None  # the posted Event's name, once its POST has landed
    count: int  # occurrences seen
    written: int  # the count the API shows (1 once posted)
    last: float  # when the last occurrence was seen (monotonic seconds)
    last_stamp: str  # and its time as the API writes it (lastTimestamp)
    written_at: float  # when the count was last written


@dataclass(frozen=True, slots=True)
class Occurrence:
    """What one occurrence asks of the recorder: post a new Event, write the count, or nothing."""

    post: bool = False
    write_count: Tally | None = None


_NOTHING = Occurrence()
_POST = Occurrence(post=True)


class EventSeries:
    def __init__(self) -> None:
        self._tallies: dict[SeriesKey, Tally] = {}
        self._next_sweep = 0.0

    def __len__(self) -> int:
        return len(self._tallies)

    def seen(self, key: SeriesKey, now: float, stamp: str) -> Occurrence:
        tally = self._tallies.get(key)
        if tally is None or now - tally.last > FINISH_SECONDS:
            self._tallies[key] = Tally(None, 1, 0, now, stamp, now)
            return _POST
        tally.count += 1
        tally.last, tally.last_stamp = now, stamp
        if tally.count == 2 and tally.name is not None:
            return Occurrence(write_count=tally)
        return _NOTHING  # counted; written when the series ends (or its POST lands)

    def posted(self, key: SeriesKey, name: str | None) -> Tally | None:
        """The first Event's POST landed as `name` (None: it failed, the series is forgotten).
        Returns the tally when repeats came meanwhile and their count is to be written."""
        tally = self._tallies.get(key)
        if tally is None:
            return None
        if name is None:
            del self._tallies[key]
            return None
        tally.name, tally.written = name, 1
        return tally if tally.count > 1 else None

    def written(self, key: SeriesKey, tally: Tally, count: int, now: float, ok: bool) -> None:
        """A count write landed (`ok`) or failed (the series is forgotten: the next occurrence
        posts a new Event, as after client-go's failed patch)."""
        if self._tallies.get(key) is not tally:
            return
        if ok:
            tally.written, tally.written_at = max(tally.written, count), now
        else:
            del self._tallies[key]

    def due(self, now: float) -> list[tuple[SeriesKey, Tally]]:
        """On a tick: the series whose count is to be written (ended, or unwritten for thirty
        minutes); ended series are forgotten. Looks only every SWEEP_SECONDS."""
        if now < self._next_sweep:
            return []
        self._next_sweep = now + SWEEP_SECONDS
        out: list[tuple[SeriesKey, Tally]] = []
        ended: list[SeriesKey] = []
        for key, tally in self._tallies.items():
            if tally.name is None:
                continue  # its POST is in flight
            if now - tally.last > FINISH_SECONDS:
                ended.append(key)
                if tally.count > tally.written:
                    out.append((key, tally))
            elif tally.count > tally.written and now - tally.written_at >= REFRESH_SECONDS:
                tally.written_at = now  # (not asked again while this write is in flight)
                out.append((key, tally))
        for key in ended:
            del self._tallies[key]
        return out
