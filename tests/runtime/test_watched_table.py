"""The one table of watched kinds drives the dispatch, the informers' projections and RBAC."""

from __future__ import annotations

import msgspec

from reconciler.api.resources import COHORTS, NODES, RESOURCE_SLICES, TOPOLOGIES
from reconciler.kube import WatchEvent
from reconciler.runtime.loop.reconciler import ALL_WATCHED, LABEL_SELECTORS, WATCHED
from reconciler.runtime.shared.watched import WATCHED_KINDS, watched_kinds
from tests.support.reconciler_harness import Harness


def test_each_kind_is_listed_once_with_a_handler_the_reconciler_has() -> None:
    plurals = [row.resource.plural for row in WATCHED_KINDS]
    assert len(plurals) == len(set(plurals))
    reconciler = Harness().reconciler
    assert set(reconciler._on_object) == set(plurals)
    for row in WATCHED_KINDS:
        assert callable(reconciler._on_object[row.resource.plural]), row.handler


def test_the_watched_sets_follow_the_table() -> None:
    assert tuple(r.resource for r in watched_kinds(inventory_on=False)) == WATCHED
    assert tuple(r.resource for r in WATCHED_KINDS) == ALL_WATCHED
    assert COHORTS in WATCHED
    assert NODES in WATCHED  # topology-aware scheduling reads them, inventory or not
    assert TOPOLOGIES in WATCHED
    assert RESOURCE_SLICES in ALL_WATCHED
    assert RESOURCE_SLICES not in WATCHED
    assert LABEL_SELECTORS == {}  # every pod: those bound to nodes take their free capacity
    assert Harness().reconciler.watched_kinds == watched_kinds(inventory_on=False)


def test_an_event_of_a_table_kind_reaches_its_handler() -> None:
    """A Cohort event (dispatched from the table) changes the engine's cohort tree."""
    h = Harness()
    cohort = msgspec.json.decode(b'{"metadata": {"name": "org"}, "spec": {}}', type=COHORTS_TYPE)
    h.reconciler.handle(WatchEvent("ADDED", COHORTS, ("", "org"), cohort))
    assert "org" in h.reconciler.ctx.engine.cache.cohort_models


COHORTS_TYPE = next(row.projection for row in WATCHED_KINDS if row.resource == COHORTS)
