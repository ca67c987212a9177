"""docs/walkthrough.md: `reconciler run` logs JSON lines, or readable lines on a terminal."""

from __future__ import annotations

import io
import json
import sys

import pytest
import structlog
from reconciler.observability.logging import configure_logging


class Stderr(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("tty", [False, True])
def test_json_lines_unless_stderr_is_a_terminal(monkeypatch: pytest.MonkeyPatch, tty: bool) -> None:
    stderr = Stderr(tty)
    monkeypatch.setattr(sys, "stderr", stderr)
    try:
        configure_logging()
        structlog.get_logger("x").warning("queue stopped", cluster_queue="cq")
    finally:
        structlog.reset_defaults()
    (line,) = stderr.getvalue().splitlines()
    if tty:
        assert not line.startswith("{")
        assert "queue stopped" in line
        assert "cluster_queue=cq" in line
    else:
        record = json.loads(line)
        assert (record["event"], record["cluster_queue"], record["level"]) == (
            "queue stopped",
            "cq",
            "warning",
        )
