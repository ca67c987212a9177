"""The controller's image under Docker, for the e2e tests that run it.

`build_image` runs e2e/build-image.sh (Debian's docker.io and debootstrap installed when
missing, dockerd started when none answers, the base image and then the controller image
built, each cached) and fails the test, with the script's words, when Docker cannot be had.

`ControllerContainer` runs `reconciler run` in the image locked down as the Deployment runs
it: read-only root filesystem, uid/gid 65532, every capability dropped, no privilege
escalation. It uses the host's network, since the test-bed listens on 127.0.0.1. The
kubeconfig (its certificate files beside it) and the Configuration are mounted read-only
at /etc/dra-quota. Containers are labelled, so those left by a killed run are removed by
the next one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.support.deploy import ROOT, free_port

__all__ = ["IMAGE_GID", "IMAGE_UID", "ControllerContainer", "build_image", "docker", "remove_leftovers"]

BUILD_SCRIPT = ROOT / "e2e" / "build-image.sh"
IMAGE_UID = 65532
IMAGE_GID = 65532
LABEL = "dra-quota-e2e"
MOUNT = "/etc/dra-quota"


def build_image(timeout: float = 1200.0) -> str:
    """The controller image's name, built (or found up to date) by e2e/build-image.sh."""
    try:
        result = subprocess.run(
            [str(BUILD_SCRIPT)], capture_output=True, text=True, check=False, timeout=timeout
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(
            f"e2e/build-image.sh did not finish within {timeout:.0f}s:\n{exc.stderr!s}", pytrace=False
        )
    if result.returncode != 0:
        pytest.fail(
            "Docker is needed to run the controller's image and e2e/build-image.sh could not provide it "
            f"(exit {result.returncode}): it installs Debian's docker.io, starts dockerd and builds the "
            f"images, as root.\n{result.stderr[-4000:]}",
            pytrace=False,
        )
    return result.stdout.strip().splitlines()[-1]


def docker(*args: str, timeout: float = 60.0, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["docker", *args], capture_output=True, text=True, check=False, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
    return result


def remove_leftovers() -> None:
    """Removes the containers an earlier, killed test run left behind."""
    names = docker("ps", "--all", "--quiet", "--filter", f"label={LABEL}").stdout.split()
    if names:
        docker("rm", "--force", *names)


def _container_kubeconfig(admin_kubeconfig: Path, directory: Path) -> None:
    """The admin kubeconfig with its certificate files copied beside it, referenced at MOUNT/kube."""
    config: dict[str, Any] = yaml.safe_load(admin_kubeconfig.read_text())
    files = {
        ("clusters", "cluster", "certificate-authority"): "ca.crt",
        ("users", "user", "client-certificate"): "client.crt",
        ("users", "user", "client-key"): "client.key",
    }
    for (section, inner, key), name in files.items():
        for entry in config[section]:
            source = entry[inner].get(key)
            if source:
                shutil.copyfile(source, directory / name)
                entry[inner][key] = f"{MOUNT}/kube/{name}"
    (directory / "kubeconfig").write_text(yaml.safe_dump(config, sort_keys=False))


def _readable_by_the_image_user(directory: Path) -> None:
    """The image user owns the mounted files (root ignores modes; others must be able to read)."""
    for path in [directory, *directory.rglob("*")]:
        if os.geteuid() == 0:
            os.chown(path, IMAGE_UID, IMAGE_GID)
            path.chmod(0o500 if path.is_dir() else 0o400)
        else:
            path.chmod(0o755 if path.is_dir() else 0o644)


class ControllerContainer:
    """`reconciler run` in the image; metrics and probes on 127.0.0.1 ports of its own."""

    def __init__(self, image: str, config: Path, admin_kubeconfig: Path, workdir: Path) -> None:
        self.image = image
        self.name = f"dra-quota-e2e-{uuid.uuid4().hex[:8]}"
        self.metrics_port = free_port()
        self.health_port = free_port()
        self.etc = workdir / "etc"
        (self.etc / "kube").mkdir(parents=True)
        shutil.copyfile(config, self.etc / "config.yaml")
        _container_kubeconfig(admin_kubeconfig, self.etc / "kube")
        _readable_by_the_image_user(self.etc)

    def start(self) -> None:
        docker(
            "run",
            "--detach",
            "--name",
            self.name,
            "--label",
            LABEL,
            "--read-only",
            "--user",
            f"{IMAGE_UID}:{IMAGE_GID}",
            "--network",
            "host",
            "--cap-drop",
            "ALL",
            "--security-opt",
            "no-new-privileges",
            "--volume",
            f"{self.etc}:{MOUNT}:ro",
            self.image,
            "run",
            "--config",
            f"{MOUNT}/config.yaml",
            "--kubeconfig",
            f"{MOUNT}/kube/kubeconfig",
            "--log-format",
            "json",
            "--metrics-bind-address",
            f"127.0.0.1:{self.metrics_port}",
            "--metrics-secure=false",  # plain HTTP on loopback: the test reads /metrics without a token
            "--health-probe-bind-address",
            f"127.0.0.1:{self.health_port}",
            "--webhook-bind-address",
            "0",
            "--visibility-bind-address",
            "0",
        )

    def running(self) -> bool:
        state = docker("inspect", "--format", "{{.State.Running}}", self.name, check=False)
        return state.stdout.strip() == "true"

    def wait_ready(self, within: float = 60.0) -> None:
        """Until /readyz answers 200; fails with the container's log if it exits or never does."""
        deadline = time.monotonic() + within
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            if not self.running():
                pytest.fail(f"the controller's container exited:\n{self.log_tail()}", pytrace=False)
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.5)
        pytest.fail(f"the controller's container was not ready within {within:.0f}s:\n{self.log_tail()}")

    def exec(self, *argv: str) -> subprocess.CompletedProcess[str]:
        """A command in the running container, as its user."""
        return docker("exec", self.name, *argv, check=False)

    def inspect(self) -> dict[str, Any]:
        (info,) = json.loads(docker("inspect", self.name).stdout)
        return dict(info)

    def logs(self) -> str:
        result = docker("logs", self.name, check=False)
        return result.stdout + result.stderr

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.logs().splitlines()[-lines:])

    def stop(self, grace: int = 15) -> int:
        """SIGTERM, SIGKILL after `grace` seconds; returns the exit code."""
        docker("stop", "--time", str(grace), self.name, timeout=grace + 30)
        return int(docker("inspect", "--format", "{{.State.ExitCode}}", self.name).stdout.strip())

    def remove(self) -> None:
        docker("rm", "--force", self.name, check=False)
