"""Kubelet gRPC protocol files (from k8s.io/kubelet) and their generated Python stubs."""
