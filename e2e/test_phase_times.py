"""The test command's table of phase times: the pytest plugin (e2e/support/phase_times.py) that
e2e/test.sh loads writes one line per phase, and e2e/test.sh prints the table with the total."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from e2e.support.deploy import ROOT
from e2e.support.phase_times import phase_of


def test_each_file_is_labelled_by_its_phase() -> None:
    assert phase_of("tests/core/test_ledger.py") == "unit tests (tests/)"
    assert phase_of("e2e/test_conformance.py") == "conformance (e2e/test_conformance.py)"
    assert phase_of("e2e/test_conformance_second.py") == (
        "conformance, second half (e2e/test_conformance_second.py)"
    )
    assert phase_of("e2e/test_conformance_parts.py") == "end-to-end: e2e/test_conformance_parts.py"
    assert phase_of("e2e/test_deploy.py") == "end-to-end: e2e/test_deploy.py"


def test_the_plugin_writes_a_line_per_phase_with_seconds(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "e2e").mkdir()
    (tmp_path / "tests/test_a.py").write_text("def test_a():\n    assert True\n")
    (tmp_path / "e2e/test_slow.py").write_text(
        "import time\n\ndef test_one():\n    time.sleep(1.2)\n\ndef test_two():\n    time.sleep(1.2)\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    out = tmp_path / "times.tsv"
    env = {**os.environ, "PHASE_TIMES": str(out), "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "e2e.support.phase_times", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = dict(line.split("\t") for line in out.read_text().splitlines())
    assert set(lines) == {"pytest: collection", "unit tests (tests/)", "end-to-end: e2e/test_slow.py"}
    assert int(lines["end-to-end: e2e/test_slow.py"]) >= 2  # both tests of the file, summed


def test_the_test_command_prints_the_table_and_passes_the_plugin() -> None:
    script = (ROOT / "e2e/test.sh").read_text()
    assert "-p e2e.support.phase_times" in script
    assert "trap print_times EXIT" in script
    assert "--kueue" not in script.split("e2e/setup.sh", 1)[1].splitlines()[0]  # CI builds no Kueue
