"""batch/v1 Jobs (Kueue's framework ``batch/job``): the integration, its webhook rules and its
registration (`job`), and the patches and Workload of a Job (`patches`)."""

from .job import BATCH_JOB, REGISTRATION, BatchJob, default_job
from .patches import (
    job_pod_count,
    job_workload_name,
    restore_patch,
    start_patch,
    suspend_patch,
    workload_for_job,
    workload_template,
)

__all__ = [
    "BATCH_JOB",
    "REGISTRATION",
    "BatchJob",
    "default_job",
    "job_pod_count",
    "job_workload_name",
    "restore_patch",
    "start_patch",
    "suspend_patch",
    "workload_for_job",
    "workload_template",
]
