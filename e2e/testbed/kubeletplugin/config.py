"""Where the kubelet plugin puts its sockets and files, and which driver and node it serves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_DRIVER_NAME = "gpu.nvidia.com"
DEFAULT_REGISTRY_DIR = Path("/var/lib/kubelet/plugins_registry")
DEFAULT_PLUGINS_DIR = Path("/var/lib/kubelet/plugins")
DEFAULT_CDI_DIR = Path("/var/run/cdi")

# The kubelet's plugin type for DRA drivers and the DRA gRPC service versions,
# in our order of preference (the kubelet takes the first one it supports).
PLUGIN_TYPE_DRA = "DRAPlugin"
SUPPORTED_VERSIONS: tuple[str, ...] = ("v1.DRAPlugin", "v1beta1.DRAPlugin")

# sockaddr_un.sun_path is 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 105  # gRPC refuses unix socket paths of 106 bytes or more


@dataclass(frozen=True, kw_only=True)
class PluginConfig:
    """Everything that decides paths and names; defaults are the kubelet's own paths."""

    node_name: str
    driver_name: str = DEFAULT_DRIVER_NAME
    registry_dir: Path = DEFAULT_REGISTRY_DIR
    plugins_dir: Path = DEFAULT_PLUGINS_DIR
    cdi_dir: Path = DEFAULT_CDI_DIR
    cdi_class: str = "gpu"
    # What the kubelet sees as the DRA socket path when it differs from ours
    # (e.g. a container mounting the host directory elsewhere). None: ours.
    advertised_endpoint: Path | None = field(default=None)

    def __post_init__(self) -> None:
        if not self.node_name:
            raise ValueError("node name must not be empty")
        if not self.driver_name or "/" in self.driver_name:
            raise ValueError(f"invalid driver name {self.driver_name!r}")
        for path in (self.registration_socket, self.dra_socket):
            if len(str(path)) > MAX_SOCKET_PATH:
                raise ValueError(f"socket path too long for a unix socket: {path}")

    @property
    def registration_socket(self) -> Path:
        """``<registry dir>/<driver>-reg.sock``, the socket the kubelet's plugin watcher finds."""
        return self.registry_dir.absolute() / f"{self.driver_name}-reg.sock"

    @property
    def plugin_dir(self) -> Path:
        """``<plugins dir>/<driver>``: the DRA socket and the checkpoint live here."""
        return self.plugins_dir.absolute() / self.driver_name

    @property
    def dra_socket(self) -> Path:
        return self.plugin_dir / "dra.sock"

    @property
    def endpoint(self) -> str:
        """The DRA socket path reported in GetInfo (absolute)."""
        return str(self.advertised_endpoint or self.dra_socket)

    @property
    def checkpoint_file(self) -> Path:
        return self.plugin_dir / "checkpoint.json"

    @property
    def cdi_vendor(self) -> str:
        """CDI vendor ``k8s.<driver>``, as DRA drivers conventionally use."""
        return f"k8s.{self.driver_name}"

    @property
    def cdi_kind(self) -> str:
        """``k8s.gpu.nvidia.com/gpu`` for the default driver."""
        return f"{self.cdi_vendor}/{self.cdi_class}"
