"""Kueue framework names -> the integrations that implement them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from .base import Integration
from .batchjob import BATCH_JOB
from .jobset import JOBSET
from .leaderworkerset import LEADER_WORKER_SET
from .pod import POD

__all__ = ["REGISTRY", "enabled"]

REGISTRY: Mapping[str, Integration] = MappingProxyType(
    {
        BATCH_JOB.framework: BATCH_JOB,
        JOBSET.framework: JOBSET,
        LEADER_WORKER_SET.framework: LEADER_WORKER_SET,
        POD.framework: POD,
    }
)


def enabled(frameworks: Iterable[str], registry: Mapping[str, Integration] = REGISTRY) -> list[Integration]:
    """The integrations `integrations.frameworks` selects from `registry` (the Configuration has
    checked the names against the registry it knows)."""
    return [registry[name] for name in frameworks if name in registry]
