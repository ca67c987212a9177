"""The workload model: compiled ClusterQueues, Workloads and the jobs they stand for."""
