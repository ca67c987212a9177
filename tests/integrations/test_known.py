"""`known_of`: the facts decide needs, from the purposes of the Workload's writes in flight; the
usual case (nothing in flight, nothing asked to be deleted) is one of four built once."""

from __future__ import annotations

import itertools

from reconciler.integrations import Known
from reconciler.integrations import known_of

PURPOSES = ("create-workload", "admit", "finish", "delete-workload", "workload-update", "evict")


def test_every_combination_reads_as_its_writes_say() -> None:
    for count in range(3):
        for writes in itertools.combinations(PURPOSES, count):
            for admitted, deleted, starting in itertools.product((False, True), repeat=3):
                got = known_of(admitted, writes, deleted=deleted, starting=starting)
                assert got == Known(
                    admitted=admitted,
                    creating="create-workload" in writes,
                    admitting="admit" in writes,
                    finishing="finish" in writes,
                    deleting=deleted or "delete-workload" in writes,
                    updating="workload-update" in writes,
                    starting=starting,
                ), (writes, admitted, deleted, starting)


def test_a_workload_asked_to_be_deleted_is_deleting_with_no_write_in_flight() -> None:
    assert known_of(True, (), deleted=True, starting=False).deleting
    assert not known_of(True, (), deleted=False, starting=False).deleting
