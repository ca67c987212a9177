"""The Workload concern: a Workload's verdicts and status, requeue and deactivation, orphans,
stopped Workloads, waitForPodsReady, preemption and eviction."""
