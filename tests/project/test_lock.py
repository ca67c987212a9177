"""The Python lock files: every dependency of pyproject.toml pinned exactly, with hashes, inside
its declared range, and the lock used where things are installed (the image, e2e/setup.sh)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def _pins(lock: str) -> dict[str, tuple[Version, int]]:
    """name -> (version, number of hashes) for each pin of a lock file."""
    pins: dict[str, tuple[Version, int]] = {}
    name = ""
    for line in (ROOT / lock).read_text().splitlines():
        if match := PIN.match(line):
            name = canonicalize_name(match[1])
            assert name not in pins, f"{lock}: {name} pinned twice"
            pins[name] = (Version(match[2]), 0)
        elif line.strip().startswith("--hash=sha256:") and name:
            version, hashes = pins[name]
            pins[name] = (version, hashes + 1)
        elif line and not line.startswith(("#", " ")):
            pytest.fail(f"{lock}: not a pin with hashes: {line!r} (refresh with e2e/lock.sh)")
    return pins


def _declared(extra: str | None) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    listed = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return [Requirement(r) for r in listed]


@pytest.mark.parametrize(
    ("lock", "extras"), [("requirements.lock", [None]), ("requirements-dev.lock", [None, "dev"])]
)
def test_every_declared_dependency_is_pinned_in_range_with_hashes(
    lock: str, extras: list[str | None]
) -> None:
    pins = _pins(lock)
    assert all(hashes for _, hashes in pins.values()), f"{lock}: a pin without hashes"
    for extra in extras:
        for requirement in _declared(extra):
            name = canonicalize_name(requirement.name)
            assert name in pins, f"{lock} lacks {requirement.name} (pyproject.toml): run e2e/lock.sh"
            version = pins[name][0]
            assert requirement.specifier.contains(version, prereleases=True), (
                f"{lock} pins {name}=={version}, outside pyproject.toml's {requirement}: run e2e/lock.sh"
            )


def test_the_dev_lock_pins_the_runtime_lock_the_same() -> None:
    runtime, dev = _pins("requirements.lock"), _pins("requirements-dev.lock")
    differ = {
        n: (v, dev.get(n, (None, 0))[0]) for n, (v, _) in runtime.items() if dev.get(n, (None, 0))[0] != v
    }
    assert not differ, f"CI would test other versions than the image ships: {differ}"


def test_the_locks_are_what_is_installed() -> None:
    setup = (ROOT / "e2e/setup.sh").read_text()
    assert "--require-hashes -r requirements-dev.lock" in setup
    assert "requirements-dev.lock | sha256sum" in setup, "a changed lock must reinstall .venv"
    assert "!requirements.lock" in (ROOT / ".dockerignore").read_text()
    assert "COPY requirements.lock /tmp/requirements.lock" in (ROOT / "Dockerfile").read_text()
