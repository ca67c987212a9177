"""Local test-bed: real control plane on loopback, node simulator, fake NVIDIA DRA driver.

One package: the control plane as processes, the agents (node and pod simulators, the fake
driver's API half, the simulated kubelets), the driver's kubelet plugin (``kubeletplugin``), the
kubelet protos (``protos``), one Kubernetes client (``kubeclient``), and what tests build and wait
for on it (``scenario``). Its own tests are in ``tests``. See e2e/README.md.
"""

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
