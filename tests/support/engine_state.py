"""What an engine holds after feeding, as comparable plain data (for tests comparing feeds)."""

from __future__ import annotations

from typing import Any

import msgspec
from reconciler.core.engine import Engine


def engine_state(engine: Engine) -> dict[str, Any]:
    """Queue objects, cohort tree, charges and queued workloads' requests; no scheduling state."""
    cache, queues, ledger = engine.cache, engine.queues, engine.ledger
    return {
        "flavors": {name: msgspec.to_builtins(f.spec) for name, f in cache.flavors.items()},
        "cluster_queues": dict(cache.cluster_queues),
        "broken_cluster_queues": dict(cache.broken_cluster_queues),
        "namespaces": {name: dict(labels) for name, labels in cache.namespaces.items()},
        "cohort_members": {name: set(m) for name, m in cache.cohorts.items() if m},
        "cohort_models": dict(cache.cohort_models),
        "child_cohorts": {name: set(c) for name, c in cache.child_cohorts.items() if c},
        "local_queues": dict(queues.local_queues),
        "charges": {key: ledger.charge_of(key) for key in sorted(ledger.holders())},
        "queued": {
            key: [(ps.name, ps.count, dict(ps.total())) for ps in info.pod_sets]
            for key, info in sorted(queues.workloads.items())
        },
    }
