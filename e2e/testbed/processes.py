"""Start, probe and stop one component process, with a log file and a pid file."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from e2e.testbed.errors import TestbedError

DEFAULT_GRACE_SECONDS = 10.0


def log_tail(path: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log file (empty string if it does not exist)."""
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode(errors="replace")
    except FileNotFoundError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _proc_state(pid: int) -> str | None:
    """The one-letter state from /proc/<pid>/stat, or None if there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # Format: pid (comm) state ...; comm may contain spaces and parentheses.
    return stat.rsplit(")", 1)[1].split()[0]


def pid_matches(pid: int, executable: str) -> bool:
    """True if ``pid`` is a live (not zombie) process whose argv[0] is ``executable``.

    Guards against signalling an unrelated process that reused a recorded pid.
    """
    state = _proc_state(pid)
    if state is None or state in ("Z", "X"):
        return False
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return argv0 == executable


def _wait_gone(pid: int, executable: str, timeout: float, child: subprocess.Popen[bytes] | None) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child is not None:
            if child.poll() is not None:
                return True
        elif not pid_matches(pid, executable):
            return True
        time.sleep(0.05)
    return False


def _signal(pid: int, sig: int) -> None:
    """Signal the process, and its whole group when it leads one (components are
    started in their own session, so helpers they spawn go too)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)


def terminate_pid(
    pid: int,
    executable: str,
    grace: float = DEFAULT_GRACE_SECONDS,
    child: subprocess.Popen[bytes] | None = None,
) -> None:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL and wait again."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        if not pid_matches(pid, executable) and (child is None or child.poll() is not None):
            return
        _signal(pid, sig)
        if _wait_gone(pid, executable, wait, child):
            return
    raise TestbedError(f"process {pid} ({executable}) survived SIGKILL")


@dataclass
class ManagedProcess:
    """One component: its command line, its log and pid files, its process."""

    name: str
    argv: Sequence[str]
    log_path: Path
    pid_path: Path
    cwd: Path
    env: Mapping[str, str] | None = None
    popen: subprocess.Popen[bytes] | None = None

    @property
    def executable(self) -> str:
        return self.argv[0]

    def start(self) -> None:
        if self.running():
            raise TestbedError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            stamp = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
            log.write(f"==== testbed: starting {self.name} at {stamp}\n".encode())
            log.flush()
            env = dict(os.environ)
            if self.env:
                env.update(self.env)
            self.popen = subprocess.Popen(
                list(self.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=env,
                start_new_session=True,  # Ctrl-C in the terminal must not reach it directly
            )
        self.pid_path.write_text(f"{self.popen.pid}\n")

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen is not None else None

    def running(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def exit_code(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    def stop(self, grace: float = DEFAULT_GRACE_SECONDS) -> None:
        if self.popen is not None:
            terminate_pid(self.popen.pid, self.executable, grace, self.popen)
            self.popen.wait()
            self.popen = None
        with contextlib.suppress(FileNotFoundError):
            self.pid_path.unlink()

    def tail(self, lines: int = 25) -> str:
        return log_tail(self.log_path, lines)
