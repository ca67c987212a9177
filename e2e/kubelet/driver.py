"""The fake DRA driver as the kind DaemonSet (e2e/kind/manifests/fake-dra-driver.yaml) on the
real node.

The image is e2e/kind/Dockerfile.driver built on the registry-free base of
e2e/build-image.sh (Docker's legacy builder, which reads only the context's .dockerignore: the
context is a copy of what Dockerfile.driver.dockerignore lets in). The manifest is applied as
it is except for the node's paths: this kubelet's root dir is in the run folder, so the
hostPath volumes, their mountPaths (the same inside as outside: the DRA socket path the plugin
reports must be valid for the kubelet), the liveness probe's socket and the plugin's
--registry-dir/--plugins-dir/--cdi-dir name the run folder's directories.
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from e2e.kubelet.node import RealNode
from e2e.support.deploy import load_documents
from e2e.testbed.paths import E2E_DIR

DRIVER_IMAGE = "fake-dra-driver:dev"
BASE_IMAGE = "dra-quota/python-base:bookworm"
MANIFEST = E2E_DIR / "kind" / "manifests" / "fake-dra-driver.yaml"
DOCKERFILE = E2E_DIR / "kind" / "Dockerfile.driver"
KIND_PATHS = ("/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins", "/var/run/cdi")
Obj = dict[str, Any]


def build_driver_image(node: RealNode) -> None:
    """docker build (legacy builder, host network for pip), docker save, import into containerd."""
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Path(tmp)
        (ctx / "e2e").mkdir()
        shutil.copy(E2E_DIR / "__init__.py", ctx / "e2e" / "__init__.py")
        shutil.copy(E2E_DIR / "versions.env", ctx / "e2e" / "versions.env")
        shutil.copytree(
            E2E_DIR / "testbed",
            ctx / "e2e" / "testbed",
            ignore=shutil.ignore_patterns("tests", "__pycache__", "*.pyc"),
        )
        build = subprocess.run(
            [
                "docker", "build", "--network", "host", "-f", str(DOCKERFILE),
                "--build-arg", f"PYTHON_IMAGE={BASE_IMAGE}", "-t", DRIVER_IMAGE, str(ctx),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "DOCKER_BUILDKIT": "0"},
            timeout=900,
            check=False,
        )  # fmt: skip
        if build.returncode != 0:
            raise RuntimeError(
                f"docker build {DRIVER_IMAGE} failed:\n{build.stdout[-3000:]}\n{build.stderr[-3000:]}"
            )
        archive = ctx / "driver.tar"
        save = subprocess.run(
            ["docker", "save", "-o", str(archive), DRIVER_IMAGE], capture_output=True, text=True
        )
        if save.returncode != 0:
            raise RuntimeError(f"docker save {DRIVER_IMAGE} failed: {save.stderr.strip()}")
        node.import_image(archive)


def driver_objects(node: RealNode) -> list[Obj]:
    """The kind manifest's objects with the kind node's paths replaced by this node's."""
    ours = dict(
        zip(KIND_PATHS, (str(node.registry_dir), str(node.plugins_dir), str(node.cdi_dir)), strict=True)
    )

    def moved(path: str) -> str:
        for kind_path in sorted(KIND_PATHS, key=len, reverse=True):
            if path == kind_path or path.startswith(kind_path + "/"):
                return ours[kind_path] + path[len(kind_path) :]
        return path

    objects = copy.deepcopy(load_documents(MANIFEST))
    for obj in objects:
        if obj["kind"] != "DaemonSet":
            continue
        pod = obj["spec"]["template"]["spec"]
        for volume in pod["volumes"]:
            volume["hostPath"]["path"] = moved(volume["hostPath"]["path"])
        (container,) = pod["containers"]
        for mount in container["volumeMounts"]:
            mount["mountPath"] = moved(mount["mountPath"])
        container["livenessProbe"]["exec"]["command"] = [
            moved(a) for a in container["livenessProbe"]["exec"]["command"]
        ]
        container["args"] = [
            *container.get("args", []),
            f"--registry-dir={node.registry_dir}",
            f"--plugins-dir={node.plugins_dir}",
            f"--cdi-dir={node.cdi_dir}",
        ]
    return objects
