"""What an e2e test runs against: the local test-bed, or an existing kind cluster."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from e2e.testbed import Testbed


@dataclass(frozen=True)
class Cluster:
    """What a test runs against: the local test-bed, or an existing kind cluster."""

    kubeconfig: Path
    target: str  # "testbed" or "kind"
    testbed: Testbed | None = None


KIND_TARGET = "kind"


def kind_cluster_from_env() -> Cluster:
    """The kind cluster named by $E2E_KUBECONFIG; fails the test with a clear message if unset."""
    target = os.environ.get("E2E_TARGET", "")
    kubeconfig = os.environ.get("E2E_KUBECONFIG", "")
    if target != KIND_TARGET or not kubeconfig:
        pytest.fail(
            "this is a kind test (@pytest.mark.kind): it needs a kind cluster with the fake DRA"
            " driver deployed, and E2E_TARGET=kind and E2E_KUBECONFIG=<its kubeconfig>"
            f" (got E2E_TARGET={target!r}, E2E_KUBECONFIG={kubeconfig!r}). Run e2e/kind/run.sh"
            " (needs Docker and kind), or deselect kind tests with -m 'not kind'.",
            pytrace=False,
        )
    path = Path(kubeconfig)
    if not path.is_file():
        pytest.fail(f"E2E_KUBECONFIG={kubeconfig} is not a file", pytrace=False)
    return Cluster(kubeconfig=path, target=KIND_TARGET)
