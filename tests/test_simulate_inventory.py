"""`reconciler simulate` with the device inventory: examples/device-inventory/."""

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
    return {c["type"]: c for c in obj["status"]["conditions"]}


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "device-inventory"


def test_enforce_admits_two_of_three_when_two_gpus_are_published(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "simulate", "--config", str(EXAMPLE / "00-configuration.yaml"), "-f", str(EXAMPLE)
    )
    assert code == 0
    found = objects(out)
    verdicts = {
        name.rsplit("-", 1)[0]: conditions(obj)["QuotaReserved"]
        for name, obj in found.items()
        if name.startswith("job-")
    }
    assert [verdicts[f"job-train-{x}"]["status"] for x in "abc"] == ["True", "True", "False"]
    assert verdicts["job-train-c"]["message"] == (
        "couldn't assign flavors to pod set main: insufficient devices for nvidia.com/gpu in flavor t4: "
        "DeviceClass gpu.nvidia.com needs 1, 0 available (2 published on the flavor's nodes)"
    )
    cq = conditions(found["inventory-cq"])["DevicesCoverQuota"]
    assert (cq["status"], cq["reason"]) == ("False", "QuotaExceedsDevices")


def test_report_and_off_admit_on_quota_alone(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    for mode, condition in (("Report", True), ("Off", False)):
        config = yaml.safe_load((EXAMPLE / "00-configuration.yaml").read_text())
        config["deviceInventory"]["mode"] = mode
        path = tmp_path / f"{mode}.yaml"
        path.write_text(yaml.safe_dump(config))
        code, out, _ = run(capsys, "simulate", "--config", str(path), "-f", str(EXAMPLE))
        assert code == 0
        found = objects(out)
        admitted = [
            n
            for n, o in found.items()
            if n.startswith("job-") and conditions(o)["QuotaReserved"]["status"] == "True"
        ]
        assert len(admitted) == 3
        assert ("DevicesCoverQuota" in conditions(found["inventory-cq"])) is condition


def test_a_slice_on_a_node_not_given_is_warned_about(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for name in ("00-configuration.yaml", "10-queues.yaml", "30-jobs.yaml"):
        (tmp_path / name).write_text((EXAMPLE / name).read_text())
    docs = [d for d in yaml.safe_load_all((EXAMPLE / "20-devices.yaml").read_text()) if d["kind"] != "Node"]
    (tmp_path / "20-devices.yaml").write_text(yaml.safe_dump_all(docs))
    code, out, err = run(
        capsys, "simulate", "--config", str(tmp_path / "00-configuration.yaml"), "-f", str(tmp_path)
    )
    assert code == 0
    assert (
        "ResourceSlice gpu-node-1-gpu.nvidia.com: spec.nodeName: Node gpu-node-1 is not in the input" in err
    )
    admitted = [
        n
        for n, o in objects(out).items()
        if n.startswith("job-") and conditions(o)["QuotaReserved"]["status"] == "True"
    ]
    assert admitted == []  # no device on the flavor's nodes
