"""`reconciler run ... 2>&1 | head -1`: once the reader of its log pipe is gone the process keeps
running, and SIGTERM still stops it, promptly and cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from tests.support.fake_apiserver import FakeApiServer
from tests.support.kubeconfigs import token_kubeconfig

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "walkthrough" / "00-configuration.yaml"
EXIT_BOUND = 10.0  # seconds from SIGTERM to exit


@pytest.mark.asyncio
async def test_sigterm_stops_the_process_after_its_log_pipe_is_closed(
    fake: FakeApiServer, tmp_path: Path
) -> None:
    # Nothing is scripted: every request fails with a 500 and is retried, so the process logs all
    # the time and hits the closed pipe at once.
    kubeconfig = token_kubeconfig(fake.url, tmp_path / "kubeconfig")
    read_end, write_end = os.pipe()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        "from reconciler.cli import main; raise SystemExit(main())",
        "run",
        "--config",
        str(CONFIG),
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
        "--log-format",
        "json",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=write_end,
        stderr=write_end,
    )
    os.close(write_end)
    try:
        first = await asyncio.to_thread(os.read, read_end, 1)
        assert first  # it has started logging
        os.close(read_end)  # as `head -1` does once it has its line
        read_end = -1
        # Its first request to the API comes after its SIGTERM handler is in place (a loaded
        # machine can take seconds to get there): a signal before that would not test the fix.
        for _ in range(300):
            if fake.requests:
                break
            await asyncio.sleep(0.1)
        assert fake.requests, "the process never reached the API server"
        await asyncio.sleep(2.0)  # it keeps logging into the closed pipe meanwhile
        assert proc.returncode is None, "the process died when its log pipe was closed"
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), EXIT_BOUND)
        assert code == 0
    finally:
        if read_end >= 0:
            os.close(read_end)
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
