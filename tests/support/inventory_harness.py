"""A reconciler harness whose device inventory is on (Enforce or another mode) for the given device
classes."""

from __future__ import annotations

from reconciler.config import parse_config
from reconciler.runtime.loop.reconciler import Reconciler
from tests.support.reconciler_harness import Harness


def enforcing(mode: str = "Enforce", classes: tuple[str, ...] = ("gpu.nvidia.com",)) -> Harness:
    config = parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "resources": {
                "deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": list(classes)}]
            },
            "deviceInventory": {"mode": mode},
        }
    )
    h = Harness()
    h.reconciler = Reconciler(config, h.actions.append, clock=lambda: "2026-01-01T00:00:00Z")
    return h
