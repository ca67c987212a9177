"""The chaos run (``python -m e2e.chaos``): a flood of mixed kinds through faults of several kinds,
with the quota checked at the charge level and at the pod level. Not part of CI's timed path.

- :mod:`e2e.chaos.replicas`: two leader-electing replicas of the controller, their roles, and a
  webhook proxy that sends the API server's calls to a replica that answers;
- :mod:`e2e.chaos.mix`: the flood's units (batch/v1 Jobs, plain pods, pod groups) and their end;
- :mod:`e2e.chaos.pod_level`: the pod-level checker (GPUs held by bound pods per ClusterQueue);
- :mod:`e2e.chaos.faults`: the faults and their seeded schedule;
- :mod:`e2e.chaos.__main__`: the command, the run and its table.
"""
