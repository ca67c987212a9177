"""What ``kueue_build_info`` says about this build: its version, git commit and build date.

Kueue stamps these into its binary at link time. A Python package has no link step, so each
comes from the first of these that knows it:

- the image's environment: the Dockerfile turns its build arguments BUILD_DATE, GIT_VERSION and
  GIT_COMMIT into DRA_QUOTA_BUILD_DATE, DRA_QUOTA_GIT_VERSION and DRA_QUOTA_GIT_COMMIT;
- the installed distribution: the build date is the time its RECORD file was written, i.e. when
  pip installed the package (in the image, during ``docker build``; COPY keeps the time), or
  without one the time its METADATA (PKG-INFO) was built; and
  the commit is the one pip recorded in direct_url.json for an install from a git URL;
- otherwise the version the caller knows and empty strings, as before.

The date has Kueue's format (``date -u +%Y-%m-%dT%H:%M:%SZ``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import Distribution, PackageNotFoundError, distribution

__all__ = [
    "DISTRIBUTION",
    "ENV_BUILD_DATE",
    "ENV_GIT_COMMIT",
    "ENV_GIT_VERSION",
    "BuildInfo",
    "build_labels",
    "read_build_info",
]

DISTRIBUTION = "dra-quota-reconciler"
ENV_BUILD_DATE = "DRA_QUOTA_BUILD_DATE"
ENV_GIT_VERSION = "DRA_QUOTA_GIT_VERSION"
ENV_GIT_COMMIT = "DRA_QUOTA_GIT_COMMIT"


@dataclass(frozen=True)
class BuildInfo:
    git_version: str
    git_commit: str
    build_date: str


def _installed(name: str) -> Distribution | None:
    try:
        return distribution(name)
    except PackageNotFoundError:
        return None


# The metadata file written when the package was installed (RECORD, by pip), else the one written
# when it was built (METADATA of a wheel, PKG-INFO of a source tree's egg-info).
_STAMPED = ("RECORD", "METADATA", "PKG-INFO")


def _install_date(dist: Distribution | None) -> str:
    files = {file.name: file for file in (dist.files or ()) if file.name in _STAMPED} if dist else {}
    for name in _STAMPED:
        if name in files:
            try:
                stamp = os.stat(str(files[name].locate())).st_mtime
            except OSError:
                continue
            return dt.datetime.fromtimestamp(stamp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return ""


def _vcs_commit(dist: Distribution | None) -> str:
    text = dist.read_text("direct_url.json") if dist is not None else None
    if not text:
        return ""
    try:
        info = json.loads(text).get("vcs_info") or {}
    except (ValueError, AttributeError):
        return ""
    commit = info.get("commit_id", "") if isinstance(info, dict) else ""
    return commit if isinstance(commit, str) else ""


def read_build_info(
    version: str, environ: Mapping[str, str] = os.environ, dist_name: str = DISTRIBUTION
) -> BuildInfo:
    """This build's labels; `version` is used when the environment names no git version."""
    dist = _installed(dist_name)
    date = environ.get(ENV_BUILD_DATE, "").strip() or _install_date(dist)
    commit = environ.get(ENV_GIT_COMMIT, "").strip() or _vcs_commit(dist)
    return BuildInfo(environ.get(ENV_GIT_VERSION, "").strip() or version, commit, date)


def build_labels(version: str, git_commit: str | None, build_date: str | None) -> tuple[str, ...]:
    """kueue_build_info's labels but the role: git_version, git_commit, build_date, go_version (the
    Python version here), compiler and platform. A commit or date given wins over the build's."""
    build = read_build_info(version)
    return (
        build.git_version,
        build.git_commit if git_commit is None else git_commit,
        build.build_date if build_date is None else build_date,
        f"python{platform.python_version()}",
        sys.implementation.name,
        f"{sys.platform}/{platform.machine()}",
    )
