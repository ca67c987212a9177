"""`reconciler simulate` on the command line for simulate's tests: run it, read what it prints."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def objects(out: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in yaml.safe_load_all(out)}


def conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj["status"].get("conditions", [])}


def jobs_only_config(examples: Path, tmp_path: Path) -> Path:
    """The example's configuration with only batch/job among its frameworks, written under tmp_path."""
    config = yaml.safe_load((examples / "00-configuration.yaml").read_text())
    config["integrations"]["frameworks"] = ["batch/job"]
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path
