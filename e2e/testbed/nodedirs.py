"""Where each simulated node keeps its kubelet directories inside the run folder.

``<run>/nodes/<node>/`` holds ``plugins_registry/`` (registration sockets, what
the kubelet's plugin watcher scans), ``plugins/`` (each driver's own directory
with its DRA socket and checkpoint) and ``cdi/`` (CDI spec files). The driver's
kubelet-plugin process and the node simulator (as kubelet) both use these
paths. A unix socket path is limited to 105 bytes (gRPC): when a deep run folder or a
long node name would make one too long, the node uses ``<run>/n/<node>/`` with
``r/`` (registry), ``p/`` (plugins) and ``cdi/``, and, if that is still too
long, ``<run>/n/<hash of the node name>/``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from e2e.testbed.names import DRIVER_NAME

MAX_SOCKET_PATH = 105  # gRPC refuses unix socket paths of 106 bytes or more


@dataclass(frozen=True)
class NodeDirs:
    root: Path
    compact: bool = False  # "r" and "p" instead of "plugins_registry" and "plugins"

    @property
    def registry_dir(self) -> Path:
        return self.root / ("r" if self.compact else "plugins_registry")

    @property
    def plugins_dir(self) -> Path:
        return self.root / ("p" if self.compact else "plugins")

    @property
    def cdi_dir(self) -> Path:
        return self.root / "cdi"

    def socket_paths(self, driver: str = DRIVER_NAME) -> tuple[Path, Path]:
        """(registration socket, DRA socket) of ``driver``, as the kubelet plugin names them."""
        return self.registry_dir / f"{driver}-reg.sock", self.plugins_dir / driver / "dra.sock"

    def fits(self, driver: str = DRIVER_NAME) -> bool:
        return all(len(str(p)) <= MAX_SOCKET_PATH for p in self.socket_paths(driver))


def node_dirs(nodes_dir: Path, node_name: str) -> NodeDirs:
    """The directories of ``node_name`` under ``nodes_dir`` (``<run>/nodes``): the first
    layout whose socket paths fit (the last one otherwise; see :meth:`NodeDirs.fits`)."""
    run_dir = nodes_dir.absolute().parent
    digest = hashlib.sha256(node_name.encode()).hexdigest()[:8]
    candidates = (
        NodeDirs(nodes_dir.absolute() / node_name),
        NodeDirs(run_dir / "n" / node_name, compact=True),
        NodeDirs(run_dir / "n" / digest, compact=True),
    )
    return next((c for c in candidates if c.fits()), candidates[-1])
