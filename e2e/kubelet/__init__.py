"""A real kubelet (with containerd 2, runc and the bridge CNI) next to the test-bed's
control plane, for the walkthrough with real containers. See e2e/kubelet/README.md."""
