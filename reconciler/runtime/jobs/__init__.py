"""The job concern: each enabled kind's jobs decided with their Workloads (created, started,
stopped, restored, finished), and the kinds whose jobs are written through their pods."""
