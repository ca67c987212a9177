"""Where each simulated node keeps its kubelet directories inside the run folder.

``<run>/nodes/<node>/`` holds ``plugins_registry/`` (registration sockets, what
the kubelet's plugin watcher scans), ``plugins/`` (each driver's own directory
with its DRA socket and checkpoint) and ``cdi/`` (CDI spec files). The driver's
kubelet-plugin process and the node simulator (as kubelet) both use these
paths. A unix socket path is limited to 107 bytes: a node name that would make
one too long gets a shortened, hashed directory name.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from e2e.testbed.names import DRIVER_NAME

MAX_SOCKET_PATH = 107  # sockaddr_un.sun_path, without the NUL


@dataclass(frozen=True)
class NodeDirs:
    root: Path

    @property
    def registry_dir(self) -> Path:
        return self.root / "plugins_registry"

    @property
    def plugins_dir(self) -> Path:
        return self.root / "plugins"

    @property
    def cdi_dir(self) -> Path:
        return self.root / "cdi"

    def socket_paths(self, driver: str = DRIVER_NAME) -> tuple[Path, Path]:
        """(registration socket, DRA socket) of ``driver``, as the kubelet plugin names them."""
        return self.registry_dir / f"{driver}-reg.sock", self.plugins_dir / driver / "dra.sock"

    def fits(self, driver: str = DRIVER_NAME) -> bool:
        return all(len(str(p)) <= MAX_SOCKET_PATH for p in self.socket_paths(driver))


def node_dirs(nodes_dir: Path, node_name: str) -> NodeDirs:
    """The directories of ``node_name`` under ``nodes_dir`` (``<run>/nodes``)."""
    plain = NodeDirs(nodes_dir.absolute() / node_name)
    if plain.fits():
        return plain
    digest = hashlib.sha256(node_name.encode()).hexdigest()[:10]
    return NodeDirs(nodes_dir.absolute() / f"{node_name[:8]}-{digest}")
