"""Where the test-bed finds its versions, its binary cache and its run folder.

Versions (control plane, kustomize, helm, Prometheus, prometheus-operator CRDs) live in
``e2e/versions.env`` only; the cache-dir rule is the same as in
``e2e/build-binaries.sh``: ``$TESTBED_CACHE``, else ``$XDG_CACHE_HOME`` or
``~/.cache``, followed by ``/dra-quota-testbed``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

E2E_DIR = Path(__file__).resolve().parent.parent
VERSIONS_FILE = E2E_DIR / "versions.env"
BUILD_SCRIPT = E2E_DIR / "build-binaries.sh"


@dataclass(frozen=True)
class Versions:
    kubernetes: str
    etcd: str
    kustomize: str
    helm: str
    prometheus: str
    prometheus_operator: str


def read_versions(path: Path = VERSIONS_FILE) -> Versions:
    """Parse the ``KEY=VALUE`` lines of versions.env (comments and blanks ignored)."""
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        values[key.strip()] = value.strip().strip("\"'")
    try:
        return Versions(
            kubernetes=values["KUBERNETES_VERSION"],
            etcd=values["ETCD_VERSION"],
            kustomize=values["KUSTOMIZE_VERSION"],
            helm=values["HELM_VERSION"],
            prometheus=values["PROMETHEUS_VERSION"],
            prometheus_operator=values["PROMETHEUS_OPERATOR_VERSION"],
        )
    except KeyError as missing:
        raise RuntimeError(f"{path} does not define {missing.args[0]}") from None


def cache_dir() -> Path:
    explicit = os.environ.get("TESTBED_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dra-quota-testbed"


def default_run_dir() -> Path:
    explicit = os.environ.get("TESTBED_RUN_DIR")
    return Path(explicit) if explicit else cache_dir() / "run"


# The prometheus-operator CRDs that manifests/prometheus/ needs.
MONITORING_CRD_FILES = (
    "monitoring.coreos.com_servicemonitors.yaml",
    "monitoring.coreos.com_prometheusrules.yaml",
)


@dataclass(frozen=True)
class BinaryPaths:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kustomize: Path
    helm: Path
    prometheus: Path
    promtool: Path
    monitoring_crds: Path  # a directory holding MONITORING_CRD_FILES

    def all(self) -> tuple[Path, ...]:
        return (
            self.etcd,
            self.kube_apiserver,
            self.kube_controller_manager,
            self.kube_scheduler,
            self.kustomize,
            self.helm,
            self.prometheus,
            self.promtool,
        )

    def missing(self) -> list[Path]:
        absent = [p for p in self.all() if not os.access(p, os.X_OK)]
        return absent + [p for p in self.monitoring_crd_files() if not p.is_file()]

    def monitoring_crd_files(self) -> list[Path]:
        return [self.monitoring_crds / name for name in MONITORING_CRD_FILES]


def binary_paths(cache: Path | None = None, versions: Versions | None = None) -> BinaryPaths:
    root = cache if cache is not None else cache_dir()
    v = versions if versions is not None else read_versions()
    k8s_bin = root / f"kubernetes-{v.kubernetes}" / "bin"
    return BinaryPaths(
        etcd=root / f"etcd-{v.etcd}" / "bin" / "etcd",
        kube_apiserver=k8s_bin / "kube-apiserver",
        kube_controller_manager=k8s_bin / "kube-controller-manager",
        kube_scheduler=k8s_bin / "kube-scheduler",
        kustomize=root / f"kustomize-{v.kustomize}" / "bin" / "kustomize",
        helm=root / f"helm-{v.helm}" / "bin" / "helm",
        prometheus=root / f"prometheus-{v.prometheus}" / "bin" / "prometheus",
        promtool=root / f"prometheus-{v.prometheus}" / "bin" / "promtool",
        monitoring_crds=root / f"prometheus-operator-crds-{v.prometheus_operator}",
    )
