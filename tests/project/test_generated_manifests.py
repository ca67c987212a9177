"""The generated parts of manifests/ are what the registry generates (`reconciler manifests`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler import generated
from reconciler.cli import main
from reconciler.integrations import REGISTRATIONS

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_manifests_are_what_the_registry_generates() -> None:
    stale = generated.write(ROOT, check=True)
    assert not stale, f"{', '.join(stale)} differ from the registry: run `reconciler manifests` to write them"


def test_every_registered_webhook_and_access_rule_is_in_the_generated_files() -> None:
    webhooks = (ROOT / "manifests" / "webhook.yaml").read_text()
    files = [ROOT / "manifests" / "rbac.yaml", *sorted((ROOT / "manifests" / "frameworks").glob("*.yaml"))]
    rbac = "".join(path.read_text() for path in files)
    for registration in REGISTRATIONS.values():
        for route in registration.webhooks:
            assert f"- name: {route.name}\n" in webhooks
            assert f"      path: {route.path}\n" in webhooks
        for access in registration.access:
            assert (
                f"  resources: [{', '.join(access.resources)}]\n  verbs: [{', '.join(access.verbs)}]" in rbac
            )


def test_the_check_fails_naming_the_command_when_a_file_is_stale(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = [target.path for target in generated.TARGETS] + [generated.CONFIGURATION]
    sources += [str(p.relative_to(ROOT)) for p in (ROOT / generated.FRAMEWORKS_DIR).glob("*.yaml")]
    for path in sources:
        copy = tmp_path / path
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text((ROOT / path).read_text())
    stale = tmp_path / "manifests" / "rbac.yaml"
    stale.write_text(
        stale.read_text().replace("  verbs: [get, list, watch, patch]\n", "  verbs: [list]\n", 1)
    )
    assert main(["manifests", "--root", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert "manifests/rbac.yaml: differs from what the registry generates" in err
    assert "run `reconciler manifests` to write them" in err
    assert main(["manifests", "--root", str(tmp_path)]) == 0
    assert main(["manifests", "--root", str(tmp_path), "--check"]) == 0
    assert stale.read_text() == (ROOT / "manifests" / "rbac.yaml").read_text()


def test_markers_missing_from_a_file_are_an_error_naming_it() -> None:
    target = generated.TARGETS[0]
    with pytest.raises(ValueError, match=r"manifests/rbac.yaml: expected 1 pairs of generated-part markers"):
        generated.render("rules:\n", target)


def test_a_framework_file_left_over_or_missing_is_stale(tmp_path: Path) -> None:
    for path in [generated.CONFIGURATION, *(t.path for t in generated.TARGETS)]:
        copy = tmp_path / path
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_text((ROOT / path).read_text())
    frameworks = tmp_path / generated.FRAMEWORKS_DIR
    frameworks.mkdir(parents=True)
    (frameworks / "gone.yaml").write_text("kind: ClusterRole\n")
    stale = generated.write(tmp_path, check=True)
    assert f"{generated.FRAMEWORKS_DIR}/gone.yaml" in stale
    assert f"{generated.FRAMEWORKS_DIR}/jobset.yaml" in stale
    generated.write(tmp_path, check=False)
    assert not (frameworks / "gone.yaml").exists()
    assert generated.write(tmp_path, check=True) == []
