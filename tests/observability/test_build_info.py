"""kueue_build_info: the build date and git labels come from the build, not constants."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
from reconciler.observability.build_info import ENV_BUILD_DATE
from reconciler.observability.build_info import ENV_GIT_COMMIT
from reconciler.observability.build_info import ENV_GIT_VERSION
from reconciler.observability.build_info import read_build_info
from reconciler.observability.metrics import Metrics

from tests.support.metrics import scrape

BUILT = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.UTC)


def install(site: Path, name: str, *, commit: str | None = None) -> None:
    """A distribution installed as pip installs a wheel: METADATA and RECORD in its dist-info."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    files = ["METADATA", "RECORD"]
    if commit is not None:
        url = {"url": "https://example.com/repo.git", "vcs_info": {"vcs": "git", "commit_id": commit}}
        (info / "direct_url.json").write_text(json.dumps(url))
        files.append("direct_url.json")
    (info / "RECORD").write_text("".join(f"{info.name}/{f},,\n" for f in files))
    stamp = BUILT.timestamp()
    os.utime(info / "RECORD", (stamp, stamp))


def build_labels(metrics: Metrics) -> dict[str, str]:
    _types, samples = scrape(metrics)
    (labels,) = [dict(k[1]) for k in samples if k[0] == "kueue_build_info"]
    return labels


def test_the_image_environment_names_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_BUILD_DATE, "2026-11-30T12:00:00Z")
    monkeypatch.setenv(ENV_GIT_VERSION, "v0.1.0-3-gabcdef0")
    monkeypatch.setenv(ENV_GIT_COMMIT, "abcdef0123456789")
    labels = build_labels(Metrics(version="0.1.0"))
    assert (labels["build_date"], labels["git_version"], labels["git_commit"]) == (
        "2026-11-30T12:00:00Z",
        "v0.1.0-3-gabcdef0",
        "abcdef0123456789",
    )


def test_without_the_environment_the_installed_distribution_dates_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    install(tmp_path, "dra-quota-built", commit="0123456789abcdef")
    monkeypatch.syspath_prepend(str(tmp_path))
    info = read_build_info("1.0", environ={ENV_BUILD_DATE: ""}, dist_name="dra-quota-built")
    assert (info.build_date, info.git_commit, info.git_version) == (
        "2026-03-04T05:06:07Z",
        "0123456789abcdef",
        "1.0",
    )


def test_the_running_package_has_a_build_date(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (ENV_BUILD_DATE, ENV_GIT_VERSION, ENV_GIT_COMMIT):
        monkeypatch.delenv(name, raising=False)
    labels = build_labels(Metrics(version="1.2.3"))
    # This checkout is installed (pip install -e): its RECORD was written at install time.
    assert dt.datetime.strptime(labels["build_date"], "%Y-%m-%dT%H:%M:%SZ") > dt.datetime(2025, 1, 1)
    assert labels["git_version"] == "1.2.3"


def test_an_unknown_distribution_leaves_the_date_empty() -> None:
    info = read_build_info("0+unknown", environ={}, dist_name="no-such-distribution-here")
    assert (info.build_date, info.git_commit, info.git_version) == ("", "", "0+unknown")
