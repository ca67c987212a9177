"""The loop: the leader-elected process (supervisor), the controller with its informers and
writer, the reconciler that drains the inbox and owns every cache, and what it shows (views,
snapshot, the metrics endpoint)."""
