"""holds_quota reads a Workload in one pass: the same answer as reading its first QuotaReserved
and first Finished conditions (`is_true`), for every mix of them, duplicates included."""

from __future__ import annotations

import itertools

from reconciler.api import Admission, Condition, ObjectMeta, Workload, WorkloadStatus
from reconciler.runtime.shared.patches import holds_quota, is_true

KINDS = [("QuotaReserved", "True"), ("QuotaReserved", "False"), ("Finished", "True"), ("Finished", "False")]
KINDS += [("Admitted", "True")]


def workload(conditions: list[Condition], *, admitted: bool = True) -> Workload:
    admission = Admission(cluster_queue="cq") if admitted else None
    return Workload(
        metadata=ObjectMeta(name="w"), status=WorkloadStatus(conditions=conditions, admission=admission)
    )


def test_one_pass_reads_as_the_first_conditions_do() -> None:
    for count in range(4):
        for picked in itertools.product(KINDS, repeat=count):
            conditions = [Condition(type=t, status=s) for t, s in picked]
            for admitted in (False, True):
                expected = (
                    admitted and is_true(conditions, "QuotaReserved") and not is_true(conditions, "Finished")
                )
                assert holds_quota(workload(conditions, admitted=admitted)) == expected, (picked, admitted)


def test_the_first_of_duplicated_conditions_decides() -> None:
    reserved = [
        Condition(type="QuotaReserved", status="False"),
        Condition(type="QuotaReserved", status="True"),
    ]
    assert not holds_quota(workload(reserved))
    finished = [
        Condition(type="QuotaReserved", status="True"),
        Condition(type="Finished", status="False"),
        Condition(type="Finished", status="True"),
    ]
    assert holds_quota(workload(finished))
