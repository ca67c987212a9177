"""Status and shutdown of a test-bed from another process, through its run folder."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from e2e.testbed.components import RunLayout
from e2e.testbed.errors import TestbedError
from e2e.testbed.health import Probe, client_ssl_context
from e2e.testbed.pki import Pki
from e2e.testbed.processes import pid_matches, terminate_pid
from e2e.testbed.runstate import load_state

_STOP_ORDER = ("agents", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd")


def _stop_order(names: Iterable[str]) -> list[str]:
    """The per-node driver plugins (any name not in the fixed list) first, then the fixed order."""
    names = list(dict.fromkeys(names))
    return [n for n in names if n not in _STOP_ORDER] + [n for n in _STOP_ORDER if n in names]


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int
    running: bool
    port: int | None
    healthy: bool
    detail: str


def _owner_pid(layout: RunLayout) -> int | None:
    """The pid of a foreground ``up`` that owns the run folder, if it still runs."""
    try:
        pid = int(layout.owner_pid_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return pid if b"e2e.testbed" in cmdline else None


def any_recorded_running(layout: RunLayout) -> bool:
    state = load_state(layout.state_file)
    running = state is not None and any(
        pid_matches(rec.pid, rec.executable) for rec in state.components.values()
    )
    return running or _owner_pid(layout) not in (None, os.getpid())


def recorded_status(layout: RunLayout) -> list[ComponentStatus]:
    state = load_state(layout.state_file)
    if state is None:
        return []
    pki = Pki(layout.pki_dir)
    ctx = client_ssl_context(pki) if pki.ca_cert.exists() else None
    result = []
    for name in reversed(_stop_order([*state.planned, *state.components])):
        rec = state.components.get(name)
        if rec is None:
            continue
        running = pid_matches(rec.pid, rec.executable)
        healthy, detail = (False, "not running")
        if running:
            healthy, detail = Probe(rec.health_url, ctx if rec.uses_tls else None).check()
        port = state.ports.get("etcd-client" if name == "etcd" else name)  # drivers: None
        result.append(ComponentStatus(name, rec.pid, running, port, healthy, detail))
    return result


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def reap_orphaned(run_dirs: Iterable[Path]) -> list[Path]:
    """Stop test-beds whose owning process died without stopping them (e.g. a killed
    pytest). Run folders whose owner still lives are left alone. Returns those reaped."""
    reaped = []
    for run_dir in run_dirs:
        layout = RunLayout(run_dir)
        state = load_state(layout.state_file)
        if state is None or not state.owner_pid or _alive(state.owner_pid):
            continue
        if _owner_pid(layout) is not None:
            continue
        if any(pid_matches(r.pid, r.executable) for r in state.components.values()):
            stop_recorded(layout)
            reaped.append(run_dir)
    return reaped


def stop_recorded(layout: RunLayout, grace: float = 10.0, owner_wait: float = 90.0) -> list[str]:
    """Stop what a run folder records: first the owning ``up``, then any leftover.

    Returns the names of components that had to be stopped here.
    """
    owner = _owner_pid(layout)
    if owner is not None and owner != os.getpid():
        with contextlib.suppress(ProcessLookupError):
            os.kill(owner, signal.SIGTERM)
        deadline = time.monotonic() + owner_wait
        while _owner_pid(layout) is not None and time.monotonic() < deadline:
            time.sleep(0.1)
    state = load_state(layout.state_file)
    stopped: list[str] = []
    errors: list[str] = []
    if state is not None:
        for name in _stop_order(state.components):
            rec = state.components.get(name)
            if rec is None or not pid_matches(rec.pid, rec.executable):
                continue
            try:
                terminate_pid(rec.pid, rec.executable, grace)
                stopped.append(name)
            except TestbedError as err:
                errors.append(str(err))
    recorded = [*state.planned, *state.components] if state is not None else []
    for name in _stop_order([*_STOP_ORDER, *recorded]):
        with contextlib.suppress(FileNotFoundError):
            layout.pid(name).unlink()
    if errors:
        raise TestbedError("; ".join(errors))
    return stopped
