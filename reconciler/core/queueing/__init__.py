"""What waits: one ClusterQueue's pending order and the queue manager."""
