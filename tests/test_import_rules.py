"""The import rules of DESIGN.md, kept as import-linter contracts in pyproject.toml.

Layers: cli over runtime over (kube | core | observability | config) over the
api floor; the core and the floor do no I/O; the core's parts and the
runtime's concerns keep their own order and independence.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(*config: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", *map(str, config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_import_contract_is_kept() -> None:
    result = _lint()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_a_broken_rule_is_reported(tmp_path: Path) -> None:
    """Guard the guard: a contract the code breaks (the core imports the api floor) fails the check."""
    config = tmp_path / "contracts.toml"
    config.write_text(
        '[tool.importlinter]\nroot_package = "reconciler"\n\n'
        "[[tool.importlinter.contracts]]\n"
        'name = "core without the floor"\ntype = "forbidden"\n'
        'source_modules = ["reconciler.core"]\nforbidden_modules = ["reconciler.api"]\n'
    )
    result = _lint(config)
    assert result.returncode != 0
    assert "BROKEN" in result.stdout
    assert "reconciler.core" in result.stdout
