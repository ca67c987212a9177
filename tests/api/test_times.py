"""api.times: the time now as the API writes it, formatted once per second."""

from __future__ import annotations

import datetime as dt

import pytest

from reconciler.api import times


def test_now_is_the_current_second_as_the_api_writes_it_also_across_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    moments = [1_700_000_000.1, 1_700_000_000.9, 1_700_000_001.0, 1_700_000_059.5, 1_700_000_000.2]
    real = dt.datetime

    class Clock(dt.datetime):
        moment = 0.0

        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Clock:
            return cls.fromtimestamp(cls.moment, tz)

    monkeypatch.setattr("reconciler.api.times.dt.datetime", Clock)
    for moment in moments:
        Clock.moment = moment
        expected = real.fromtimestamp(int(moment), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert times.now_rfc3339() == expected


def test_now_follows_the_clock() -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    stamp = dt.datetime.strptime(times.now_rfc3339(), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    after = dt.datetime.now(dt.UTC)
    assert before <= stamp <= after
