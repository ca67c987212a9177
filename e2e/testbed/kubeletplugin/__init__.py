"""The kubelet half of the fake NVIDIA DRA driver, and a fake kubelet to drive it.

* :class:`KubeletPlugin` serves the plugin-registration and DRA (v1, v1beta1)
  gRPC services on unix sockets, reading claims through a :class:`ClaimSource`.
* :class:`FakeKubelet` discovers and registers plugins in a registry directory
  and calls NodePrepareResources / NodeUnprepareResources, as a kubelet does.
* ``python -m e2e.testbed.kubeletplugin`` runs the plugin against an API server.
"""

from e2e.testbed.kubeletplugin.claims import ClaimSource, InMemoryClaimSource, KubeClaimSource
from e2e.testbed.kubeletplugin.config import PluginConfig
from e2e.testbed.kubeletplugin.dra_client import DraPluginClient
from e2e.testbed.kubeletplugin.kubelet import FakeKubelet, claim_drivers, pod_claim_names
from e2e.testbed.kubeletplugin.kubelet_registration import (
    RegisteredPlugin,
    RegistrationError,
    register_plugin,
)
from e2e.testbed.kubeletplugin.model import ClaimRef, PreparedDevice, PrepareResult
from e2e.testbed.kubeletplugin.plugin import KubeletPlugin, PluginError

__all__ = [
    "ClaimRef",
    "ClaimSource",
    "DraPluginClient",
    "FakeKubelet",
    "InMemoryClaimSource",
    "KubeClaimSource",
    "KubeletPlugin",
    "PluginConfig",
    "PluginError",
    "PrepareResult",
    "PreparedDevice",
    "RegisteredPlugin",
    "RegistrationError",
    "claim_drivers",
    "pod_claim_names",
    "register_plugin",
]
