"""`reconciler explain --what-if FILE`: its usage errors name what to give (the dry run itself is
tested in tests/simulate/test_what_if.py and, against a real API server, e2e/test_explain_cohorts.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cli import main

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "e2e" / "conformance" / "manifests" / "preemption-high-c.yaml"


def test_what_if_needs_the_configuration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--what-if", str(JOB)]) == 2
    assert "--what-if needs --config FILE" in capsys.readouterr().err


def test_what_if_and_a_target_are_not_given_together(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "job", "ns/a", "--what-if", str(JOB)]) == 2
    assert "either KIND NAMESPACE/NAME or --what-if FILE" in capsys.readouterr().err


def test_explain_without_a_target_says_what_to_give(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain"]) == 2
    assert "give KIND NAMESPACE/NAME (or --what-if FILE)" in capsys.readouterr().err


def test_a_missing_file_is_named(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = ROOT / "e2e" / "conformance" / "manifests" / "configuration.yaml"
    missing = tmp_path / "nope.yaml"
    assert main(["explain", "--what-if", str(missing), "--config", str(config)]) == 2
    assert f"{missing}: no such file or directory" in capsys.readouterr().err
