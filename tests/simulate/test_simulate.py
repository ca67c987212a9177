"""`reconciler simulate` against the walkthrough of examples/ (the repository's own copy)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.simulate_cli import conditions, objects, run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "walkthrough"
PENDING_MESSAGE = (
    "couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
    "in flavor p3-t4, 1 more needed"
)


def test_walkthrough_items_2_3_4(capsys: pytest.CaptureFixture[str]) -> None:
    walkthrough = EXAMPLES
    code, out, _ = run(
        capsys, "simulate", "--config", str(walkthrough / "00-configuration.yaml"), "-f", str(walkthrough)
    )
    assert code == 0
    found = objects(out)
    running = next(o for n, o in found.items() if n.startswith("job-kueue-dra-running-a-"))
    pending = next(o for n, o in found.items() if n.startswith("job-kueue-dra-pending-b-"))
    assert len(running["metadata"]["name"]) == len("job-kueue-dra-running-a-") + 5

    # Item 2: admitted to p3-dra-cq with the GPU charged to p3-t4.
    admission = running["status"]["admission"]
    assert admission["clusterQueue"] == "p3-dra-cq"
    (assignment,) = admission["podSetAssignments"]
    assert assignment["count"] == 1
    assert assignment["flavors"]["nvidia.com/gpu"] == "p3-t4"
    assert assignment["resourceUsage"]["nvidia.com/gpu"] == "1"
    conds = conditions(running)
    assert conds["QuotaReserved"]["status"] == "True"
    assert conds["Admitted"]["status"] == "True"

    # Item 3: the ClusterQueue counts it and shows the GPU in use.
    cq = found["p3-dra-cq"]["status"]
    assert cq["admittedWorkloads"] == 1
    (usage,) = cq["flavorsUsage"]
    assert usage["name"] == "p3-t4"
    assert {r["name"]: r["total"] for r in usage["resources"]}["nvidia.com/gpu"] == "1"

    # Item 4: job B waits with Kueue's exact message and its requests.
    quota = conditions(pending)["QuotaReserved"]
    assert (quota["status"], quota["reason"], quota["message"]) == ("False", "Pending", PENDING_MESSAGE)
    assert "admission" not in pending["status"]
    assert pending["status"]["resourceRequests"] == [{"name": "main", "resources": {"nvidia.com/gpu": "1"}}]
    assert cq["pendingWorkloads"] == 1


def test_walkthrough_table(capsys: pytest.CaptureFixture[str]) -> None:
    walkthrough = EXAMPLES
    code, out, _ = run(
        capsys,
        "simulate",
        "--config",
        str(walkthrough / "00-configuration.yaml"),
        "-f",
        str(walkthrough),
        "-o",
        "table",
    )
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "QUEUE", "RESERVED", "IN", "ADMITTED", "FINISHED"]
    assert lines[1].split()[1:] == ["p3-dra-queue", "p3-dra-cq", "True"]
    assert lines[2].split()[1:] == ["p3-dra-queue"]


def test_item_7_unmapped_device_class(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    walkthrough = EXAMPLES
    config = yaml.safe_load((walkthrough / "00-configuration.yaml").read_text())
    del config["resources"]["deviceClassMappings"]
    unmapped = tmp_path / "config.yaml"
    unmapped.write_text(yaml.safe_dump(config))
    code, out, _ = run(capsys, "simulate", "--config", str(unmapped), "-f", str(walkthrough), "-o", "json")
    assert code == 0
    items = yaml.safe_load(out)["items"]
    workloads = [o for o in items if o["kind"] == "Workload"]
    assert len(workloads) == 2
    for wl in workloads:
        quota = conditions(wl)["QuotaReserved"]
        assert quota["status"] == "False"
        assert quota["reason"] == "Inadmissible"
        assert quota["message"] == (
            "spec.podSets[0].template.spec.resourceClaims[0].resourceClaimTemplateName: Not found: "
            '"DeviceClass gpu.nvidia.com is not mapped in DRA configuration for podset main"'
        )
        assert (
            "DeviceClass gpu.nvidia.com is not mapped in DRA configuration for podset main"
            in (conditions(wl)["Requeued"]["message"])
        )
    # Nothing else is disturbed: the ClusterQueue stays active with nothing charged.
    cq = next(o for o in items if o["kind"] == "ClusterQueue")
    assert conditions(cq)["Active"]["status"] == "True"
    assert cq["status"]["admittedWorkloads"] == 0


def test_bad_input_names_object_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "job.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": "broken",
                    "namespace": "ns",
                    "labels": {"kueue.x-k8s.io/queue-name": "q"},
                },
                "spec": {"parallelism": "two", "template": {"spec": {"containers": []}}},
            }
        )
    )
    code, _, err = run(
        capsys, "simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-f", str(tmp_path)
    )
    assert code == 2
    assert "job.yaml#0: Job ns/broken: spec.parallelism: expected int | null, got str" in err


def test_bad_quota_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "cq.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ClusterQueue",
                "metadata": {"name": "cq"},
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {"name": "f", "resources": [{"name": "cpu", "nominalQuota": "lots"}]}
                            ],
                        }
                    ]
                },
            }
        )
    )
    code, _, err = run(
        capsys, "simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-f", str(tmp_path)
    )
    assert code == 2
    assert (
        "ClusterQueue cq: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: "
        "'lots' is not a quantity"
    ) in err


def test_missing_path(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(
        capsys, "simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-f", "/nonexistent/dir"
    )
    assert code == 2
    assert "/nonexistent/dir: no such file or directory" in err


def test_admitted_workloads_in_input_hold_their_quota(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-f", str(EXAMPLES)
    )
    assert code == 0
    admitted = next(
        o for o in yaml.safe_load_all(out) if o["kind"] == "Workload" and "admission" in o["status"]
    )
    (tmp_path / "admitted.yaml").write_text(yaml.safe_dump(admitted))
    for name in ("10-queues.yaml", "20-resourceclaimtemplate.yaml", "31-job-pending-b.yaml"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())
    code, out, _ = run(
        capsys, "simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-f", str(tmp_path)
    )
    assert code == 0
    found = objects(out)
    pending = next(o for n, o in found.items() if n.startswith("job-kueue-dra-pending-b-"))
    assert conditions(pending)["QuotaReserved"]["message"] == PENDING_MESSAGE


def test_priority_classes_set_the_workload_priority_and_a_missing_one_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("10-queues.yaml", "20-resourceclaimtemplate.yaml"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())
    job = yaml.safe_load((EXAMPLES / "30-job-running-a.yaml").read_text())
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
    (tmp_path / "40-job.yaml").write_text(yaml.safe_dump(job))
    config = str(EXAMPLES / "00-configuration.yaml")
    code, _, err = run(capsys, "simulate", "--config", config, "-f", str(tmp_path))
    assert code == 2
    assert "label kueue.x-k8s.io/priority-class names WorkloadPriorityClass 'urgent'" in err
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass"}
    (tmp_path / "05-priority.yaml").write_text(
        yaml.safe_dump({**wpc, "metadata": {"name": "urgent"}, "value": 900})
    )
    code, out, _ = run(capsys, "simulate", "--config", config, "-f", str(tmp_path))
    assert code == 0
    (workload,) = [o for o in yaml.safe_load_all(out) if o["kind"] == "Workload"]
    assert workload["spec"]["priority"] == 900
    assert workload["spec"]["priorityClassRef"]["name"] == "urgent"


def test_simulate_preempts_a_lower_priority_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queues = list(yaml.safe_load_all((EXAMPLES / "10-queues.yaml").read_text()))
    for obj in queues:
        if obj["kind"] == "ClusterQueue":
            obj["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    (tmp_path / "10-queues.yaml").write_text(yaml.safe_dump_all(queues))
    (tmp_path / "20-resourceclaimtemplate.yaml").write_text(
        (EXAMPLES / "20-resourceclaimtemplate.yaml").read_text()
    )
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass"}
    (tmp_path / "05-priority.yaml").write_text(
        yaml.safe_dump({**wpc, "metadata": {"name": "urgent"}, "value": 900})
    )
    first = yaml.safe_load((EXAMPLES / "30-job-running-a.yaml").read_text())
    second = yaml.safe_load((EXAMPLES / "31-job-pending-b.yaml").read_text())
    second["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "urgent"
    (tmp_path / "40-jobs.yaml").write_text(yaml.safe_dump_all([first, second]))
    code, out, _ = run(
        capsys, "simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-f", str(tmp_path)
    )
    assert code == 0
    found = objects(out)
    urgent = next(o for n, o in found.items() if n.startswith("job-kueue-dra-pending-b-"))
    preempted = next(o for n, o in found.items() if n.startswith("job-kueue-dra-running-a-"))
    assert conditions(urgent)["QuotaReserved"]["status"] == "True"
    assert conditions(preempted)["QuotaReserved"]["status"] == "False"


DRA_EXAMPLES = ROOT / "examples" / "dra-beyond-kueue"


def test_first_available_and_shared_claims_offline(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "simulate", "--config", str(DRA_EXAMPLES / "00-configuration.yaml"), "-f", str(DRA_EXAMPLES)
    )
    assert code == 0
    assert "ignored" not in err  # the ResourceClaim is read, not skipped
    found = objects(out)
    first = next(o for n, o in found.items() if n.startswith("job-first-available-"))
    shared = next(o for n, o in found.items() if n.startswith("job-shared-claim-"))
    assert first["metadata"]["annotations"]["dra-quota-reconciler/first-available"] == (
        "podset main, claim gpu, request gpu: subrequest whole "
        "(DeviceClass gpu.nvidia.com charged as 1 nvidia.com/gpu)"
    )
    for workload in (first, shared):
        assert conditions(workload)["Admitted"]["status"] == "True"
    (assignment,) = shared["status"]["admission"]["podSetAssignments"]
    assert assignment["count"] == 3
    assert assignment["resourceUsage"] == {"nvidia.com/gpu": "1"}  # the shared claim, once


def test_first_available_prefers_a_subrequest_the_cluster_queue_has_quota_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = yaml.safe_load((DRA_EXAMPLES / "00-configuration.yaml").read_text())
    config["resources"]["deviceClassMappings"].append(
        {"name": "nvidia.com/mig", "deviceClassNames": ["mig.nvidia.com"]}
    )
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    for file in DRA_EXAMPLES.glob("[1-9]*.yaml"):
        (manifests / file.name).write_text(file.read_text())
    key = "dra-quota-reconciler/first-available"

    def choice() -> tuple[str, dict[str, Any]]:
        code, out, _ = run(
            capsys, "simulate", "--config", str(tmp_path / "config.yaml"), "-f", str(manifests)
        )
        assert code == 0
        first = next(o for n, o in objects(out).items() if n.startswith("job-first-available-"))
        return first["metadata"]["annotations"][key], first

    # MIG slices are mapped, but the ClusterQueue has no quota for them: the whole GPU is charged.
    chosen, first = choice()
    assert "subrequest whole" in chosen
    assert conditions(first)["Admitted"]["status"] == "True"
    # Once the ClusterQueue covers nvidia.com/mig, the first subrequest is the one charged.
    queues = list(yaml.safe_load_all((manifests / "10-queues.yaml").read_text()))
    cq = next(q for q in queues if q["kind"] == "ClusterQueue")
    cq["spec"]["resourceGroups"].append(
        {
            "coveredResources": ["nvidia.com/mig"],
            "flavors": [{"name": "t4", "resources": [{"name": "nvidia.com/mig", "nominalQuota": 4}]}],
        }
    )
    (manifests / "10-queues.yaml").write_text(yaml.safe_dump_all(queues))
    chosen, first = choice()
    assert "subrequest mig" in chosen
    assert first["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {"nvidia.com/mig": "1"}


def _cohort_input(tmp_path: Path, cohort_gpus: int | str) -> None:
    queues = list(yaml.safe_load_all((EXAMPLES / "10-queues.yaml").read_text()))
    for obj in queues:
        if obj["kind"] == "ClusterQueue":
            obj["spec"]["cohortName"] = "org"
            gpu = obj["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
            gpu["nominalQuota"] = 0
    cohort = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "org"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "p3-t4",
                            "resources": [{"name": "nvidia.com/gpu", "nominalQuota": cohort_gpus}],
                        }
                    ],
                }
            ]
        },
    }
    (tmp_path / "10-queues.yaml").write_text(yaml.safe_dump_all([*queues, cohort]))
    for name in ("20-resourceclaimtemplate.yaml", "30-job-running-a.yaml", "31-job-pending-b.yaml"):
        (tmp_path / name).write_text((EXAMPLES / name).read_text())


def test_simulate_borrows_a_cohort_objects_quota(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _cohort_input(tmp_path, 1)
    code, out, _ = run(
        capsys, "simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-f", str(tmp_path)
    )
    assert code == 0
    found = objects(out)
    first = next(o for n, o in found.items() if n.startswith("job-kueue-dra-running-a-"))
    second = next(o for n, o in found.items() if n.startswith("job-kueue-dra-pending-b-"))
    assert conditions(first)["QuotaReserved"]["status"] == "True"
    assert conditions(second)["QuotaReserved"]["status"] == "False"
    (gpu,) = [
        r
        for r in found["p3-dra-cq"]["status"]["flavorsReservation"][0]["resources"]
        if r["name"] == "nvidia.com/gpu"
    ]
    assert (gpu["total"], gpu["borrowed"]) == ("1", "1")


def test_simulate_names_the_field_of_a_bad_cohort(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _cohort_input(tmp_path, "lots")
    code, _, err = run(
        capsys, "simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-f", str(tmp_path)
    )
    assert code != 0
    assert "Cohort org: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota" in err


def test_simulate_preempts_a_lower_priority_borrower_while_borrowing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queues = list(yaml.safe_load_all((EXAMPLES / "10-queues.yaml").read_text()))
    template = next(o for o in queues if o["kind"] == "ClusterQueue")
    docs = [o for o in queues if o["kind"] in ("Namespace", "ResourceFlavor")]
    for name, gpus, preemption in (
        (
            "urgent",
            0,
            {"reclaimWithinCohort": "LowerPriority", "borrowWithinCohort": {"policy": "LowerPriority"}},
        ),
        ("batch", 0, None),
        ("lender", 1, None),
    ):
        cq = yaml.safe_load(yaml.safe_dump(template))
        cq["metadata"]["name"] = name
        cq["spec"]["cohortName"] = "pool"
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = gpus
        if preemption:
            cq["spec"]["preemption"] = preemption
        docs.append(cq)
        lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue"}
        docs.append(
            {**lq, "metadata": {"name": name, "namespace": "p3-dra-demo"}, "spec": {"clusterQueue": name}}
        )
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass"}
    docs.append({**wpc, "metadata": {"name": "high"}, "value": 1000})
    (tmp_path / "10-queues.yaml").write_text(yaml.safe_dump_all(docs))
    (tmp_path / "20-resourceclaimtemplate.yaml").write_text(
        (EXAMPLES / "20-resourceclaimtemplate.yaml").read_text()
    )
    low = yaml.safe_load((EXAMPLES / "30-job-running-a.yaml").read_text())
    high = yaml.safe_load((EXAMPLES / "31-job-pending-b.yaml").read_text())
    low["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "batch"
    high["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "urgent"
    high["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "high"
    (tmp_path / "40-jobs.yaml").write_text(yaml.safe_dump_all([low, high]))
    code, out, _ = run(
        capsys, "simulate", "--config", str(EXAMPLES / "00-configuration.yaml"), "-f", str(tmp_path)
    )
    assert code == 0
    found = objects(out)
    urgent = next(o for n, o in found.items() if n.startswith("job-kueue-dra-pending-b-"))
    borrower = next(o for n, o in found.items() if n.startswith("job-kueue-dra-running-a-"))
    assert urgent["status"]["admission"]["clusterQueue"] == "urgent"
    assert conditions(borrower)["QuotaReserved"]["status"] == "False"
