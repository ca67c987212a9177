"""A manager under test run as a child process: its own session (so a signal reaches all it
started), its output in a log file, its readiness from its /readyz on a loopback port."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

__all__ = ["ManagedProcess"]


class ManagedProcess:
    """What the controller's, Kueue's and JobSet's process wrappers share; each starts its own
    ``process`` and sets ``log_path`` and ``health_port``."""

    what = "the process"  # in failure messages
    ready_within = 60.0
    process: subprocess.Popen[bytes] | None = None
    log_path: Path
    health_port: int

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.process is not None and self.alive():
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def stop(self, grace: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after `grace` seconds; returns the exit code."""
        if self.process is None:
            return None
        if self.alive():
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def log_tail(self, lines: int = 40) -> str:
        if not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def wait_ready(self, within: float | None = None) -> None:
        """Until /readyz answers 200; fails early, with the log's tail, if the process exits."""
        within = self.ready_within if within is None else within
        deadline = time.monotonic() + within
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            if not self.alive():
                code = None if self.process is None else self.process.returncode
                raise RuntimeError(f"{self.what} exited ({code}):\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.2)
        raise TimeoutError(f"{self.what} was not ready within {within:.0f}s:\n{self.log_tail()}")

    async def wait_ready_async(self, within: float | None = None) -> None:
        """wait_ready from a running event loop (in a thread)."""
        await asyncio.to_thread(self.wait_ready, within)
