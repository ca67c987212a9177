"""Local test-bed: real control plane on loopback, node simulator, fake NVIDIA DRA driver."""

from e2e.testbed.errors import TestbedError
from e2e.testbed.kubeclient import ApiError, KubeClient, api_path
from e2e.testbed.spec import GpuSpec, NodeSpec, TestbedSpec, default_spec, load_spec
from e2e.testbed.testbed import Testbed

__all__ = [
    "ApiError",
    "GpuSpec",
    "KubeClient",
    "NodeSpec",
    "Testbed",
    "TestbedError",
    "TestbedSpec",
    "api_path",
    "default_spec",
    "load_spec",
]
