"""Helm (built by e2e/build-binaries.sh) on the project's chart, isolated from the user's Helm.

`Helm(home)` runs the cached helm binary with its cache, configuration and data
directories under `home` (no repositories, no plugins, nothing of ~/.config/helm),
optionally against a kubeconfig; every call has a timeout. `template` returns the
rendered objects, `run` the completed process (a non-zero exit raises `HelmError`
quoting helm's stderr unless `check=False`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from e2e.support.deploy import ROOT
from e2e.testbed.paths import binary_paths

__all__ = ["CHART", "Helm", "HelmError"]

CHART = ROOT / "manifests" / "helm" / "dra-quota-reconciler"


class HelmError(RuntimeError):
    def __init__(self, args: list[str], result: subprocess.CompletedProcess[str]) -> None:
        super().__init__(f"helm {' '.join(args)} exited {result.returncode}:\n{result.stderr.strip()}")
        self.stderr = result.stderr
        self.returncode = result.returncode


class Helm:
    def __init__(self, home: Path, kubeconfig: Path | None = None, chart: Path = CHART) -> None:
        self.binary = binary_paths().helm
        self.home = home
        self.kubeconfig = kubeconfig
        self.chart = chart

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
        env.update(
            HELM_CACHE_HOME=str(self.home / "cache"),
            HELM_CONFIG_HOME=str(self.home / "config"),
            HELM_DATA_HOME=str(self.home / "data"),
        )
        env.pop("KUBECONFIG", None)
        if self.kubeconfig is not None:
            env["KUBECONFIG"] = str(self.kubeconfig)
        return env

    def run(self, *args: str, check: bool = True, timeout: float = 180.0) -> subprocess.CompletedProcess[str]:
        argv = [str(self.binary), *args]
        result = subprocess.run(
            argv, capture_output=True, text=True, env=self._env(), timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise HelmError(list(args), result)
        return result

    def template(self, *args: str, release: str = "dra-quota-reconciler") -> list[dict[str, Any]]:
        """The objects `helm template RELEASE CHART --include-crds ARGS` renders."""
        result = self.run("template", release, str(self.chart), "--include-crds", *args, timeout=60)
        return [d for d in yaml.safe_load_all(result.stdout) if isinstance(d, dict)]
