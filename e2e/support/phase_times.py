"""A pytest plugin for the test command's table of phase times (e2e/test.sh loads it with
`-p e2e.support.phase_times`; inactive unless $PHASE_TIMES names a file).

Appends one `label<TAB>seconds` line per phase to that file when the session ends: collection,
the unit tests (tests/) as one phase, each end-to-end test file (e2e/) as its own, the
conformance scenarios (their two halves) apart. A file's time is the wall time of its
tests including their fixtures' set-up and teardown, so the session test-bed's start is
counted in the first file that uses it and its stop in the last test's file.
"""

from __future__ import annotations

import os
import time
from collections.abc import Generator
from pathlib import Path

import pytest

ENV = "PHASE_TIMES"


def phase_of(path: str) -> str:
    """The table's label for a test file (a path relative to the repository)."""
    if path.startswith("tests/"):
        return "unit tests (tests/)"
    if path.startswith("e2e/test_conformance.py"):
        return "conformance (e2e/test_conformance.py)"
    if path.startswith("e2e/test_conformance_second.py"):
        return "conformance, second half (e2e/test_conformance_second.py)"
    return f"end-to-end: {path}"


class PhaseTimes:
    def __init__(self, out: Path, root: Path) -> None:
        self.out = out
        self.root = root
        self.started = time.monotonic()
        self.collected: float | None = None
        self.seconds: dict[str, float] = {}

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = time.monotonic() - self.started

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        began = time.monotonic()
        yield
        label = phase_of(_relative(item.path, self.root))
        self.seconds[label] = self.seconds.get(label, 0.0) + time.monotonic() - began

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        lines = []
        if self.collected is not None:
            lines.append(f"pytest: collection\t{self.collected:.0f}")
        lines += [f"{label}\t{seconds:.0f}" for label, seconds in self.seconds.items()]
        with self.out.open("a") as out:
            out.writelines(line + "\n" for line in lines)


def _relative(path: Path, root: Path) -> str:
    return str(path.relative_to(root)) if path.is_relative_to(root) else str(path)


def pytest_configure(config: pytest.Config) -> None:
    target = os.environ.get(ENV)
    if target:
        config.pluginmanager.register(PhaseTimes(Path(target), config.rootpath), "phase-times-recorder")
