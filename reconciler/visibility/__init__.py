"""Kueue's visibility API (``visibility.kueue.x-k8s.io``): pending workloads, served as an aggregated API."""
