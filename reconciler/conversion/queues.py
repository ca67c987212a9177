"""ClusterQueue, Cohort and LocalQueue between v1beta1 and v1beta2, field by field as Kueue
v0.18.1 converts them (its ``apis/kueue/v1beta1/*_conversion.go`` and generated conversions).

ClusterQueue: ``spec.cohort`` is v1beta2's ``spec.cohortName``; v1beta1's ``spec.admissionChecks``
(names) becomes ``spec.admissionChecksStrategy`` with one rule per name and comes back as that
strategy; the deprecated ``flavorFungibility`` values ``Preempt`` and ``Borrow`` become
``MayStopSearch``. Fields one version lacks are dropped as Kueue drops them: v1beta2's
``spec.concurrentAdmissionPolicy`` going down, v1beta1's ``status.pendingWorkloadsStatus`` and
``status.fairSharing.admissionFairSharingStatus`` (ClusterQueue and Cohort) going up.

LocalQueue: ``status.flavorsUsage`` is v1beta1's ``status.flavorUsage``, moved both ways;
v1beta1's ``status.flavors`` is dropped going up.
"""

from __future__ import annotations

from .fields import ConversionError, Obj, list_at, mapping_at, rename

__all__ = [
    "cluster_queue_down",
    "cluster_queue_up",
    "cohort_up",
    "local_queue_down",
    "local_queue_up",
]

_DEPRECATED_FUNGIBILITY = {"whenCanPreempt": "Preempt", "whenCanBorrow": "Borrow"}


def cluster_queue_up(obj: Obj) -> None:
    spec = mapping_at(obj, "spec", "")
    if spec is not None:
        if spec.get("cohort") == "":
            del spec["cohort"]
        rename(spec, "cohort", "cohortName")
        _admission_checks_up(spec)
        fungibility = mapping_at(spec, "flavorFungibility", "spec")
        if fungibility is not None:
            for key, old in _DEPRECATED_FUNGIBILITY.items():
                if fungibility.get(key) == old:
                    fungibility[key] = "MayStopSearch"
    status = mapping_at(obj, "status", "")
    if status is not None:
        status.pop("pendingWorkloadsStatus", None)
        _fair_sharing_status_up(status)


def _admission_checks_up(spec: Obj) -> None:
    names = list_at(spec, "admissionChecks", "spec")
    spec.pop("admissionChecks", None)
    if not names:
        return
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise ConversionError(
                f"spec.admissionChecks[{i}]", "must be the name of an AdmissionCheck (a string)"
            )
    spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in names]}


def _fair_sharing_status_up(status: Obj) -> None:
    fair = mapping_at(status, "fairSharing", "status")
    if fair is not None:
        fair.pop("admissionFairSharingStatus", None)


def cluster_queue_down(obj: Obj) -> None:
    spec = mapping_at(obj, "spec", "")
    if spec is not None:
        rename(spec, "cohortName", "cohort")
        spec.pop("concurrentAdmissionPolicy", None)


def cohort_up(obj: Obj) -> None:
    status = mapping_at(obj, "status", "")
    if status is not None:
        _fair_sharing_status_up(status)


def local_queue_up(obj: Obj) -> None:
    status = mapping_at(obj, "status", "")
    if status is not None:
        status.pop("flavors", None)
        rename(status, "flavorUsage", "flavorsUsage")


def local_queue_down(obj: Obj) -> None:
    status = mapping_at(obj, "status", "")
    if status is not None:
        rename(status, "flavorsUsage", "flavorUsage")
