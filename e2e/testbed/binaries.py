"""Make sure the control-plane binaries exist, building them if needed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from e2e.testbed.errors import TestbedError
from e2e.testbed.paths import BUILD_SCRIPT, BinaryPaths, binary_paths


def ensure_binaries(*, quiet: bool = False) -> BinaryPaths:
    """Return the binaries, running e2e/build-binaries.sh first if any is missing.

    The script is idempotent and prints the cache directory as its last stdout
    line; its progress goes to stderr (shown unless ``quiet``).
    """
    found = binary_paths()
    if not found.missing():
        return found
    result = subprocess.run(
        ["bash", str(BUILD_SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL if quiet else sys.stderr,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise TestbedError(
            f"{BUILD_SCRIPT} failed with exit code {result.returncode}; run it by hand to see why"
        )
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if not lines:
        raise TestbedError(f"{BUILD_SCRIPT} printed no cache directory")
    built = binary_paths(Path(lines[-1].strip()))
    if built.missing():
        raise TestbedError(f"binaries still missing after the build: {built.missing()}")
    return built
