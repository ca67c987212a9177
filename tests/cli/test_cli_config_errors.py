"""A Configuration file that cannot be used stops `reconciler run`, `simulate` and `explain
--config` with one line naming the file and the problem (exit 2), never a traceback; the reload
path (`read_config`) reports the same line and keeps running."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler import cli
from reconciler.runtime.queues.config_reload import read_config

HEAD = b"apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"


def _invalid_utf8(tmp: Path) -> tuple[Path, str]:
    path = tmp / "latin1.yaml"
    path.write_bytes(HEAD + b"# caf\xe9\n")
    return path, f"{path}: not valid UTF-8: byte(s) e9 at offset {len(HEAD) + 5}; save the file as UTF-8"


def _directory(tmp: Path) -> tuple[Path, str]:
    path = tmp / "conf.d"
    path.mkdir()
    return path, f"{path}: cannot read the configuration: Is a directory"


def _missing(tmp: Path) -> tuple[Path, str]:
    path = tmp / "absent.yaml"
    return path, f"{path}: cannot read the configuration: No such file or directory"


def _unreadable(tmp: Path) -> tuple[Path, str]:
    """A file that exists but cannot be read: mode 000; as root (CI), which reads any mode, a file
    whose read fails all the same (/proc/self/mem at offset 0: EIO)."""
    path = tmp / "secret.yaml"
    path.write_bytes(HEAD)
    path.chmod(0)
    if not os.access(path, os.R_OK):
        return path, f"{path}: cannot read the configuration: Permission denied"
    unreadable = Path("/proc/self/mem")
    return unreadable, f"{unreadable}: cannot read the configuration: Input/output error"


def _not_yaml(tmp: Path) -> tuple[Path, str]:
    path = tmp / "broken.yaml"
    path.write_bytes(HEAD + b"a: b\n  c: d\n")
    return path, f"{path}: not valid YAML: mapping values are not allowed here (line 4, column 4)"


def _too_deep(tmp: Path) -> tuple[Path, str]:
    path = tmp / "deep.yaml"
    path.write_bytes(b"[" * 2000)  # deeper than the interpreter recurses
    return path, f"{path}: not valid YAML: nested too deeply to be read"


BAD_FILES: dict[str, Callable[[Path], tuple[Path, str]]] = {
    "invalid-utf8": _invalid_utf8,
    "directory": _directory,
    "missing": _missing,
    "unreadable": _unreadable,
    "not-yaml": _not_yaml,
    "too-deep": _too_deep,
}
COMMANDS = {
    "run": lambda config: ["run", "--config", config],
    "simulate": lambda config: ["simulate", "--config", config, "-f", os.devnull],
    "explain": lambda config: ["explain", "--config", config, "workload", "ns/w"],
}


# The three commands read the file with the same load_config: the slow one (seconds) only once.
CASES = [(c, b) for c in sorted(COMMANDS) for b in sorted(BAD_FILES) if c == "run" or b != "too-deep"]


@pytest.mark.parametrize(("command", "bad"), CASES)
def test_a_bad_configuration_file_is_one_line_naming_it(
    command: str, bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, message = BAD_FILES[bad](tmp_path)
    code = cli.main(COMMANDS[command](str(path)))
    err = capsys.readouterr().err
    assert code == cli.EXIT_USAGE
    assert err == f"error: {message}\n"


@pytest.mark.parametrize("bad", sorted(BAD_FILES))
def test_a_reload_of_a_bad_file_is_the_same_line(bad: str, tmp_path: Path) -> None:
    path, message = BAD_FILES[bad](tmp_path)
    change = read_config(str(path), None)
    assert change is not None
    assert (change.config, change.error) == (None, message)
    assert read_config(str(path), change.digest) is None  # reported once


def test_a_kueue_framework_not_implemented_is_a_warning_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Kueue's shipped Configuration enables frameworks this build lacks: `simulate` runs and names
    them on stderr; a reload of such a file is taken (the controller warns, as at start-up)."""
    path = tmp_path / "spark.yaml"
    path.write_bytes(
        HEAD + b"integrations:\n  frameworks: [batch/job, sparkoperator.k8s.io/sparkapplication]\n"
    )
    queues = Path(__file__).parents[2] / "examples/walkthrough/10-queues.yaml"
    assert cli.main(["simulate", "--config", str(path), "-f", str(queues)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(
        "warning: integrations.frameworks enables Kueue frameworks this controller does not implement, "
        "whose objects are not queued: sparkoperator.k8s.io/sparkapplication (integrations.frameworks[1])"
    )
    change = read_config(str(path), None)
    assert change is not None
    assert change.error is None
    assert change.config is not None
    assert change.config.frameworks == ("batch/job", "sparkoperator.k8s.io/sparkapplication")
