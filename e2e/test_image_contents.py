"""The container image's contents, built the way the Dockerfile builds them, without Docker.

The builder stage's `pip wheel . --no-deps`, the venv stage's install of that
wheel and its bytecode compilation are repeated here (tests/project/test_deploy_files.py
checks the Dockerfile runs the same commands); then the installed `reconciler`
runs from that venv made read-only, as the image's user 65532 when the tests
run as root (root ignores file modes), with PYTHONDONTWRITEBYTECODE=1 and a HOME
that does not exist. Nothing may be written and every module must come
precompiled. Dependencies are installed from requirements.lock as the image's
(from the package index; pip's cache makes a repeat run quick).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.deploy_files import BUILD_WHEEL, COMPILE_VENV, INSTALL_LOCKED, INSTALL_WHEEL

pytestmark = pytest.mark.timeout(600)

ROOT = Path(__file__).resolve().parent.parent
IMAGE_UID = 65532


def _run(
    argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(argv, capture_output=True, text=True, check=False, cwd=cwd, env=env)
    assert result.returncode == 0, f"{argv} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
    return result


def _snapshot(root: Path) -> dict[str, tuple[int, float]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime) for p in root.rglob("*")}


@pytest.fixture(scope="module")
def image_root() -> Iterator[Path]:
    # Not under pytest's tmp_path: its parents are private to root, the image user must read this.
    root = Path(tempfile.mkdtemp(prefix="dra-quota-image-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        for path in root.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(root)


@pytest.fixture(scope="module")
def venv(image_root: Path) -> Path:
    wheels = image_root / "wheels"
    venv = image_root / "venv"
    # Builder stage: the wheel, from a copy of what .dockerignore lets into the build context.
    context = image_root / "context"
    context.mkdir()
    shutil.copy(ROOT / "pyproject.toml", context)
    shutil.copy(ROOT / "README.md", context)
    shutil.copytree(ROOT / "reconciler", context / "reconciler", ignore=shutil.ignore_patterns("__pycache__"))
    build = BUILD_WHEEL.replace("python ", f"{sys.executable} ", 1).replace("/wheels", str(wheels))
    _run(build.split(), cwd=context)
    # Venv stage: a fresh venv, the locked dependencies, the wheel, pip removed, bytecode compiled.
    _run([sys.executable, "-m", "venv", str(venv)])
    install = INSTALL_WHEEL.replace("/opt/venv", str(venv)).replace("/wheels/*.whl", "")
    (wheel,) = wheels.glob("*.whl")
    # Not the test process's PYTHONPATH: e2e/test.sh runs pytest with PYTHONPATH=. (the phase-times
    # plugin), and through it pip found the checkout's own metadata and skipped the wheel
    # ("already installed with the same version"), leaving a venv without the package.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip_env = {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    locked = INSTALL_LOCKED.replace("/opt/venv", str(venv)).replace("/tmp/requirements.lock", "")
    _run([*locked.split(), str(ROOT / "requirements.lock")], env=pip_env)
    installed = _run([*install.split(), str(wheel)], env=pip_env)
    assert (venv / "bin" / "reconciler").exists(), (
        f"pip installed no entry point from {wheel.name} ({wheel.stat().st_size} bytes):\n"
        f"{installed.stdout}\n{installed.stderr}"
    )
    _run([str(venv / "bin/pip"), "uninstall", "--yes", "pip", "setuptools"])
    compile_venv = COMPILE_VENV.replace("python ", f"{sys.executable} ", 1).replace("/opt/venv", str(venv))
    _run(compile_venv.split())
    # The image's files belong to root and are not writable: make them read-only here too.
    for path in [venv, *venv.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    return venv


def _as_image_user(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{argv[0].rsplit('/', 1)[0]}:/usr/bin:/bin",
        "PYTHONDONTWRITEBYTECODE": "1",
        "HOME": "/nonexistent",
    }
    if os.geteuid() == 0:
        argv = ["setpriv", f"--reuid={IMAGE_UID}", f"--regid={IMAGE_UID}", "--clear-groups", *argv]
    return _run(argv, cwd=cwd, env=env)


def test_the_package_is_precompiled(venv: Path) -> None:
    (site,) = venv.glob("lib/python3*/site-packages")
    sources = list((site / "reconciler").rglob("*.py"))
    assert sources
    missing = [p for p in sources if not list((p.parent / "__pycache__").glob(f"{p.stem}.cpython-*.pyc"))]
    assert missing == []
    # Nothing of the source tree's editable install leaks in.
    assert not list(site.glob("__editable__*"))
    assert not (venv / "bin/pip").exists()


def test_runs_from_a_read_only_venv_without_writing(venv: Path, image_root: Path) -> None:
    examples = image_root / "examples"
    if not examples.exists():
        shutil.copytree(ROOT / "examples" / "walkthrough", examples)
    before = _snapshot(venv)
    reconciler = str(venv / "bin" / "reconciler")

    version = _as_image_user([reconciler, "version"], cwd=image_root)
    expected = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert version.stdout.strip() == expected

    # The whole admission core imports and runs from the installed wheel.
    table = _as_image_user(
        [reconciler, "simulate", "--config", "00-configuration.yaml", "-f", ".", "-o", "table"], cwd=examples
    )
    assert "p3-dra-cq" in table.stdout
    assert "job-kueue-dra-running-a-" in table.stdout

    usage = _as_image_user([reconciler, "run", "--help"], cwd=image_root)
    assert "--config" in usage.stdout
    assert _snapshot(venv) == before
