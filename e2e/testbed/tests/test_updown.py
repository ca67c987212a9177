"""``up``, ``down``, ``up`` again on the same machine; ``down`` leaves no process
and no listening port behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from e2e.testbed.components import REPO_ROOT, START_ORDER, RunLayout
from e2e.testbed.health import Probe, client_ssl_context
from e2e.testbed.pki import Pki
from e2e.testbed.ports import is_listening
from e2e.testbed.runstate import load_state

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "e2e.testbed", *args]


def _processes_mentioning(needle: str) -> list[str]:
    """Command lines of live processes whose argv mentions ``needle`` (the run dir)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError, PermissionError, IndexError):
            continue
        if needle in cmdline and state != "Z":
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def _wait_for_export(out: Path, proc: subprocess.Popen[bytes], err: Path) -> str:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        for line in out.read_text().splitlines():
            if line.startswith("export KUBECONFIG="):
                return line.split("=", 1)[1]
        if proc.poll() is not None:
            raise AssertionError(f"`up` exited with {proc.returncode}:\n{err.read_text()}")
        time.sleep(0.2)
    raise AssertionError(f"`up` printed no KUBECONFIG line:\n{err.read_text()}")


def _up_then_down(run_dir: Path, round_no: int) -> float:
    out, err = run_dir.parent / f"up{round_no}.out", run_dir.parent / f"up{round_no}.err"
    env = dict(os.environ, TESTBED_RUN_DIR=str(run_dir))
    began = time.monotonic()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        up = subprocess.Popen(
            _cli("up"), stdout=stdout, stderr=stderr, cwd=REPO_ROOT, env=env, start_new_session=True
        )
    try:
        kubeconfig = _wait_for_export(out, up, err)
        started = time.monotonic() - began
        assert Path(kubeconfig) == run_dir.resolve() / "admin.kubeconfig"
        status = subprocess.run(
            _cli("status"), cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
        )
        assert status.returncode == 0, status.stdout + status.stderr
        state = load_state(run_dir / "state.json")
        assert state is not None
        assert sorted(state.components) == sorted([*START_ORDER, "driver-gpu-node-1"])
        assert "driver-gpu-node-1" in status.stdout, status.stdout
        registration, _ = RunLayout(run_dir.resolve()).node("gpu-node-1").socket_paths()
        assert registration.is_socket()
        ports = list(state.ports.values())
        assert all(is_listening(p) for p in ports), state.ports
        pki = Pki(run_dir / "pki")
        ok, detail = Probe(f"{state.server}/version", client_ssl_context(pki)).check()
        assert ok, detail
        assert '"gitVersion": "v1.36.3"' in detail or "v1.36" in detail

        down = subprocess.run(
            _cli("down"), cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert up.wait(timeout=60) == 0, err.read_text()
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
    # Every process (the driver plugins too) had the run dir in its argv.
    assert _processes_mentioning(str(run_dir.resolve())) == []
    assert not registration.exists()
    assert [p for p in ports if is_listening(p)] == []
    for pid in (rec.pid for rec in state.components.values()):
        assert not Path(f"/proc/{pid}").exists() or pid == os.getpid()
    after = subprocess.run(
        _cli("status"), cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert after.returncode == 1, after.stdout
    return started


def test_up_down_up_down(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    first = _up_then_down(run_dir, 1)
    second = _up_then_down(run_dir, 2)
    print(f"`up` until KUBECONFIG printed: {first:.1f}s, then {second:.1f}s")
