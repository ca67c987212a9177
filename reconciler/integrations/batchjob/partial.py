"""Partial admission of a batch/v1 Job, as Kueue v0.18.1 does it (its PartialAdmission gate is on).

A Job annotated ``kueue.x-k8s.io/job-min-parallelism: "N"`` may run with fewer pods than it asks
for: its pod set carries ``minCount: N`` and the scheduler admits the largest count between N and
the full count that fits. Starting sets ``spec.parallelism`` to the admitted count (and
``spec.completions`` too when ``kueue.x-k8s.io/job-completions-equal-parallelism: "true"``); an
eviction gives the Job back the parallelism its Workload recorded.

Kueue's webhook rules, kept here: the minimum is a whole number between 1 and the pod count less
one; the completions annotation is a boolean, only for an Indexed Job whose completions equal its
parallelism; a running Job with the minimum cannot change its parallelism, nor (running) switch
the completions annotation. ``kueue.x-k8s.io/elastic-job`` (Kueue's workload slices) is refused by
name: this controller does not run elastic Jobs.
"""

from __future__ import annotations

from reconciler.admission.fielderrors import FieldError, Path, forbidden, invalid
from reconciler.api import Job

__all__ = [
    "COMPLETIONS_EQUAL_PARALLELISM",
    "ELASTIC_JOB",
    "MIN_PARALLELISM",
    "job_pod_count",
    "job_rules",
    "job_update_rules",
    "min_pod_count",
    "parallelism_patch",
    "syncs_completions",
]

MIN_PARALLELISM = "kueue.x-k8s.io/job-min-parallelism"
COMPLETIONS_EQUAL_PARALLELISM = "kueue.x-k8s.io/job-completions-equal-parallelism"
ELASTIC_JOB = "kueue.x-k8s.io/elastic-job"

_ANNOTATIONS = Path("metadata.annotations")


def job_pod_count(job: Job) -> int:
    """The pods a Job runs at once: its parallelism, or its completions when fewer."""
    parallelism = 1 if job.spec.parallelism is None else job.spec.parallelism
    if job.spec.completions is not None:
        return min(parallelism, job.spec.completions)
    return parallelism


def min_pod_count(job: Job) -> int | None:
    """The Job's minimum pod count for partial admission, as Kueue reads it (None: not set or not
    a whole number; the webhook refuses the latter)."""
    raw = job.metadata.annotations.get(MIN_PARALLELISM)
    if raw is None:
        return None
    try:
        return int(raw.strip()) if raw.strip() == raw else None
    except ValueError:
        return None


def syncs_completions(job: Job) -> bool:
    return _parse_bool(job.metadata.annotations.get(COMPLETIONS_EQUAL_PARALLELISM)) is True


def parallelism_patch(job: Job, count: int) -> dict[str, int]:
    """The spec fields a partially admissible Job gets for `count` pods ({} for any other Job)."""
    if min_pod_count(job) is None:
        return {}
    out = {"parallelism": count}
    if syncs_completions(job):
        out["completions"] = count
    return out


def _parse_bool(raw: str | None) -> bool | None:
    """Go's strconv.ParseBool."""
    if raw in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if raw in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    return None


def _min_rules(job: Job) -> list[FieldError]:
    raw = job.metadata.annotations.get(MIN_PARALLELISM)
    if raw is None:
        return []
    path = _ANNOTATIONS.key(MIN_PARALLELISM)
    value = min_pod_count(job)
    if value is None:
        return [invalid(path, raw, f'strconv.Atoi: parsing "{raw}": invalid syntax')]
    count = job_pod_count(job)
    if value >= count or value <= 0:
        return [invalid(path, value, f"should be between 0 and {count - 1}")]
    return []


def _sync_rules(job: Job) -> list[FieldError]:
    raw = job.metadata.annotations.get(COMPLETIONS_EQUAL_PARALLELISM)
    if raw is None:
        return []
    path = _ANNOTATIONS.key(COMPLETIONS_EQUAL_PARALLELISM)
    enabled = _parse_bool(raw)
    if enabled is None:
        return [invalid(path, raw, f'strconv.ParseBool: parsing "{raw}": invalid syntax')]
    errors: list[FieldError] = []
    if enabled:
        if job.spec.completion_mode in (None, "NonIndexed"):
            errors.append(invalid(path, raw, "should not be enabled for NonIndexed jobs"))
        parallelism = 1 if job.spec.parallelism is None else job.spec.parallelism
        completions = 1 if job.spec.completions is None else job.spec.completions
        if parallelism != completions:
            detail = (
                f"should be equal to parallelism when {COMPLETIONS_EQUAL_PARALLELISM} is annotation is true"
            )
            # (Kueue's own wording, its typo included)
            errors.append(invalid("spec.completions", job.spec.completions, detail))
    return errors


def _elastic(job: Job) -> list[FieldError]:
    value = job.metadata.annotations.get(ELASTIC_JOB)
    if value is None:
        return []
    detail = (
        "elastic jobs (workload slices) are not supported by this controller: remove the annotation to run "
        f"the job at its declared size, or use {MIN_PARALLELISM} to let it start with fewer pods"
    )
    return [invalid(_ANNOTATIONS.key(ELASTIC_JOB), value, detail)]


def job_rules(job: Job) -> list[FieldError]:
    """Kueue's rules for a managed Job being created."""
    return _min_rules(job) + _sync_rules(job) + _elastic(job)


def job_update_rules(new: Job, old: Job) -> list[FieldError]:
    """Kueue's rules for a managed Job being updated."""
    errors: list[FieldError] = []
    if new.metadata.annotations.get(MIN_PARALLELISM) != old.metadata.annotations.get(MIN_PARALLELISM):
        errors += _min_rules(new)
    errors += _sync_rules(new) + _elastic(new)
    running = MIN_PARALLELISM in old.metadata.annotations and not old.spec.suspend
    if running and (old.spec.parallelism or 1) != (new.spec.parallelism or 1):
        detail = "cannot change when partial admission is enabled and the job is not suspended"
        errors.append(forbidden("spec.parallelism", detail))
    both_running = not old.spec.suspend and not new.spec.suspend
    if both_running and syncs_completions(old) != syncs_completions(new):
        path = _ANNOTATIONS.key(COMPLETIONS_EQUAL_PARALLELISM)
        errors.append(forbidden(path, "field is immutable while the job is not suspended"))
    return errors
