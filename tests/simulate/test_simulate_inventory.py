"""`reconciler simulate` with the device inventory: examples/device-inventory/."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.support.simulate_cli import conditions, objects, run

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "device-inventory"


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
            if n.startswith("job-") and conditions(o).get("QuotaReserved", {}).get("status") == "True"
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
        if n.startswith("job-") and conditions(o).get("QuotaReserved", {}).get("status") == "True"
    ]
    assert admitted == []  # no device on the flavor's nodes


DEVICES = Path(__file__).resolve().parents[2] / "examples" / "dra-beyond-kueue" / "devices"


def test_all_devices_and_gpu_memory_quota_offline(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        capsys, "simulate", "--config", str(DEVICES / "00-configuration.yaml"), "-f", str(DEVICES)
    )
    assert code == 0
    found = {name.rsplit("-", 1)[0]: obj for name, obj in objects(out).items() if name.startswith("job-")}
    whole_a, whole_b = found["job-whole-node-a"], found["job-whole-node-b"]
    part_a, part_b = found["job-partition-a"], found["job-partition-b"]
    assert conditions(whole_a)["Admitted"]["status"] == "True"
    (assignment,) = whole_a["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"nvidia.com/gpu": "2"}  # the most GPUs on one A100 node
    assert whole_a["metadata"]["annotations"]["dra-quota-reconciler/device-charges"] == (
        "podset main, claim gpus, request gpus: 2 device(s) of DeviceClass gpu.nvidia.com (allocationMode "
        "All: the most on one node of flavor a100) charged as 2 nvidia.com/gpu"
    )
    assert conditions(whole_b)["QuotaReserved"]["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
        "a100, 1 more needed"
    )
    (assignment,) = part_a["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"] == {"nvidia.com/mig": "1", "nvidia.com/gpu-memory": "10Gi"}
    assert conditions(part_b)["QuotaReserved"]["message"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu-memory in "
        "flavor a100, 5Gi more needed"
    )
    cq = conditions(objects(out)["devices-cq"])["DevicesCoverQuota"]
    assert cq["status"] == "True"


def test_all_devices_without_the_inventory_is_refused_with_the_fix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = yaml.safe_load((DEVICES / "00-configuration.yaml").read_text())
    config["deviceInventory"]["mode"] = "Off"
    path = tmp_path / "off.yaml"
    path.write_text(yaml.safe_dump(config))
    code, out, _ = run(capsys, "simulate", "--config", str(path), "-f", str(DEVICES))
    assert code == 0
    found = {name.rsplit("-", 1)[0]: obj for name, obj in objects(out).items() if name.startswith("job-")}
    message = conditions(found["job-whole-node-a"])["QuotaReserved"]["message"]
    assert message.endswith(
        "AllocationMode 'All' is not supported; this controller charges it from the device inventory: "
        "set deviceInventory.mode to Report or Enforce in the Configuration"
    )
    assert "capacity.requests.memory" in conditions(found["job-partition-a"])["QuotaReserved"]["message"]
