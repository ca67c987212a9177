"""The run folder's record of what runs where (state.json), readable by other shells."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec


class ComponentRecord(msgspec.Struct, kw_only=True):
    pid: int
    executable: str
    log: str
    health_url: str
    uses_tls: bool


class RunState(msgspec.Struct, kw_only=True):
    server: str
    kubeconfig: str
    ports: dict[str, int]
    components: dict[str, ComponentRecord] = msgspec.field(default_factory=dict)
    owner_pid: int = 0  # the process holding the Testbed object (0: unknown)
    # Every component the test-bed has, in start order, running or not.
    planned: list[str] = msgspec.field(default_factory=list)


def save_state(path: Path, state: RunState) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(msgspec.json.format(msgspec.json.encode(state)))
    os.replace(tmp, path)


def load_state(path: Path) -> RunState | None:
    try:
        return msgspec.json.decode(path.read_bytes(), type=RunState)
    except FileNotFoundError:
        return None
