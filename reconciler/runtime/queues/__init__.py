"""The cluster's queues and what they stand on: ClusterQueue and LocalQueue status, in-use
finalizers, the device inventory, and the Configuration's live reload."""
