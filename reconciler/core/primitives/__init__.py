"""The core's floor: quantities, pod requests, node selectors, priorities, ordering and pod status."""
