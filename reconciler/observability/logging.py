"""structlog set-up: readable on a terminal, JSON lines elsewhere (in a cluster).

A log line that cannot be written (the pipe to the reader is closed, e.g. `reconciler run ... 2>&1
| head -1`, or the disk is full) never fails the code that logs: the process must go on, and stop
on SIGTERM, whatever became of its output. Once stderr's pipe is gone, the descriptor is pointed at
/dev/null, so later writes (and the interpreter's flush at exit) succeed silently.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, TextIO

import structlog

__all__ = ["SafeLoggerFactory", "SafePrintLogger", "configure_logging", "silence_broken_stream"]


def silence_broken_stream(stream: TextIO) -> None:
    """Point a stream whose reader is gone at /dev/null (its descriptor too, when it has one)."""
    try:
        fd = stream.fileno()
    except (OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


class SafePrintLogger:
    """structlog's PrintLogger, but a line that cannot be written is dropped, never raised."""

    def __init__(self, file: TextIO) -> None:
        self._file = file
        self._broken = False

    def msg(self, message: str) -> None:
        if self._broken:
            return
        try:
            print(message, file=self._file, flush=True)
        except BrokenPipeError:
            self._broken = True
            silence_broken_stream(self._file)
        except (OSError, ValueError):
            pass  # a full disk or a closed file: this line is lost, the next may get through

    log = debug = info = warn = warning = msg
    fatal = failure = err = error = critical = exception = msg


class SafeLoggerFactory:
    def __init__(self, file: TextIO) -> None:
        self._logger = SafePrintLogger(file)

    def __call__(self, *args: Any) -> SafePrintLogger:
        return self._logger


def configure_logging(level: str = "info", *, json: bool | None = None) -> None:
    as_json = not sys.stderr.isatty() if json is None else json
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        logger_factory=SafeLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )
