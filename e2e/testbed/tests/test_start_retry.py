"""A test-bed whose component finds its port taken (another process bound it between the draw
and the bind) is started again on fresh ports; any other start-up failure is raised at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.testbed.errors import TestbedError
from e2e.testbed.testbed import Testbed

TAKEN = "kube-controller-manager exited during start-up; log tail: bind: address already in use"


def starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failures: list[str]) -> list[int]:
    calls: list[int] = []

    def once(self: Testbed) -> None:
        calls.append(1)
        if failures:
            raise TestbedError(failures.pop(0))

    monkeypatch.setattr(Testbed, "_start_once", once)
    Testbed(tmp_path / "run", build=False, echo=None).start()
    return calls


def test_a_taken_port_starts_the_testbed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert len(starts(tmp_path, monkeypatch, [TAKEN, TAKEN])) == 3


def test_it_gives_up_after_three_attempts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TestbedError, match="address already in use"):
        starts(tmp_path, monkeypatch, [TAKEN, TAKEN, TAKEN])


def test_another_failure_is_raised_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    failures = ["missing binaries: ['etcd']", TAKEN]
    with pytest.raises(TestbedError, match="missing binaries"):
        starts(tmp_path, monkeypatch, failures)
    assert failures == [TAKEN]
