"""The plugin's record of prepared claims, a JSON file in its plugin directory."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import msgspec

from e2e.testbed.kubeletplugin.files import write_atomically
from e2e.testbed.kubeletplugin.model import Checkpoint

log = logging.getLogger(__name__)


def load_checkpoint(path: Path, driver_name: str, node_name: str) -> Checkpoint:
    """Read the checkpoint (blocking); empty when missing.

    An unreadable file, or one written for another driver or node, is moved
    aside to ``<name>.bad`` and an empty checkpoint is returned: the kubelet
    will prepare again whatever it still needs.
    """
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return Checkpoint(driver_name=driver_name, node_name=node_name)
    problem = ""
    try:
        checkpoint = msgspec.json.decode(data, type=Checkpoint)
    except msgspec.DecodeError as err:
        problem = str(err)
    else:
        if checkpoint.driver_name == driver_name and checkpoint.node_name == node_name:
            return checkpoint
        problem = f"written for {checkpoint.driver_name} on {checkpoint.node_name}"
    log.warning("ignoring checkpoint %s (%s); moved to %s.bad", path, problem, path.name)
    os.replace(path, path.with_name(path.name + ".bad"))
    return Checkpoint(driver_name=driver_name, node_name=node_name)


def save_checkpoint(path: Path, checkpoint: Checkpoint) -> None:
    """Write the checkpoint atomically (blocking)."""
    write_atomically(path, msgspec.json.format(msgspec.json.encode(checkpoint), indent=2) + b"\n")
