"""`reconciler simulate` shows what the API would show after a preemption during the run: the victim
carries the conditions real Kueue v0.18.1 left in the conformance recordings, and exactly those the
controller's reconciler writes for the same objects."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reconciler.cli import main
from reconciler.simulate import InputObject, simulate
from tests.support.builders import cluster_queue_body
from tests.support.reconciler_harness import GPU
from tests.support.simulate_controller import KUEUE, NOW, Key, Obj, _workload, through_controller

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = ROOT / "e2e" / "conformance"


# --- against real Kueue's recordings --------------------------------------------------------


def _scenario_args(scenario: Obj) -> list[str]:
    """simulate over every manifest the scenario applies, in its order, with its Configuration."""
    args = ["simulate", "--config", str(ROOT / scenario["configuration"])]
    for step in scenario["steps"]:
        applied = step.get("apply", [])
        for path in [applied] if isinstance(applied, str) else applied:
            args += ["-f", str(ROOT / path)]
    return args


def _simulate_scenario(capsys: pytest.CaptureFixture[str], scenario: Obj) -> list[Obj]:
    assert main(_scenario_args(scenario)) == 0
    return [o for o in yaml.safe_load_all(capsys.readouterr().out) if o and o["kind"] == "Workload"]


def _uids_hidden(message: str) -> str:
    # The recordings hide UIDs; offline manifests have none (Kueue's UNKNOWN).
    return re.sub(r"UID: [^,)]+", "UID: <uid>", message)


@pytest.mark.parametrize(
    ("scenario_name", "victim", "reason"),
    [
        ("preemption-within-cluster-queue", "low-a", "InClusterQueue"),
        ("borrow-within-cohort", "low-batch", "InCohortReclaimWhileBorrowing"),
    ],
)
def test_the_victims_conditions_are_those_kueue_left(
    capsys: pytest.CaptureFixture[str], scenario_name: str, victim: str, reason: str
) -> None:
    scenario = yaml.safe_load((CONFORMANCE / "scenarios" / f"{scenario_name}.yaml").read_text())
    recorded = yaml.safe_load((CONFORMANCE / "recorded" / f"{scenario_name}.yaml").read_text())
    (result,) = recorded["results"]
    checkpoint = result["checkpoints"][scenario["steps"][-1]["checkpoint"]]
    workloads = _simulate_scenario(capsys, scenario)
    assert len(workloads) == 2
    for workload in workloads:
        job = workload["metadata"]["ownerReferences"][0]["name"]
        prefix = f"Workload[p3-dra-demo/Job/{job}].conditions."
        # PodsReady: the pods' state, which simulate does not model.
        kueue = {k[len(prefix) :]: v for k, v in checkpoint.items() if k.startswith(prefix)}
        kueue.pop("PodsReady", None)
        shown = {
            c["type"]: _uids_hidden(f"{c['status']} {c['reason']}: {c['message']}")
            for c in workload["status"]["conditions"]
        }
        assert shown == kueue, job
    (preempted,) = [w for w in workloads if w["metadata"]["ownerReferences"][0]["name"] == victim]
    conditions = {c["type"]: c for c in preempted["status"]["conditions"]}
    assert (conditions["Preempted"]["status"], conditions["Preempted"]["reason"]) == ("True", reason)
    assert "admission" not in preempted["status"]


def test_the_table_and_json_show_the_preemption(capsys: pytest.CaptureFixture[str]) -> None:
    scenario = yaml.safe_load(
        (CONFORMANCE / "scenarios" / "preemption-within-cluster-queue.yaml").read_text()
    )
    args = _scenario_args(scenario)
    assert main([*args, "-o", "table"]) == 0
    workloads, _, evictions = capsys.readouterr().out.strip().split("\n\n")
    low, high = workloads.splitlines()[1:]
    assert low.split()[1:] == ["p3-dra-queue", "False"]  # no reservation, Admitted=False
    assert high.split()[1:] == ["p3-dra-queue", "p3-dra-cq", "True"]
    header, row = evictions.splitlines()
    assert header.split() == ["NAME", "EVICTED", "PREEMPTED", "REQUEUED"]
    assert row.split() == [low.split()[0], "Preempted", "InClusterQueue", "True"]
    assert main([*args, "-o", "json"]) == 0
    items = yaml.safe_load(capsys.readouterr().out)["items"]
    (victim,) = [o for o in items if o["metadata"]["name"] == low.split()[0].split("/")[1]]
    types = [(c["type"], c["status"]) for c in victim["status"]["conditions"]]
    assert ("Evicted", "True") in types
    assert ("Preempted", "True") in types


# --- against the controller's reconciler -------------------------------------------------------


def reclamation() -> tuple[list[Obj], list[Obj]]:
    """A cohort `pool` under a Cohort `org`: `batch` (no quota of its own) runs a low priority
    Workload on `lender`'s GPU; then `lender`, which reclaims within the cohort, gets a Workload of
    its own. The queue objects, and the Workloads in their order of arrival."""
    lender = cluster_queue_body("lender", [("t4", {GPU: 1})], cohort="pool")
    lender["spec"]["preemption"] = {"reclaimWithinCohort": "Any"}
    queues: list[Obj] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "t4"}, "spec": {}},
        {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "org"}, "spec": {}},
        {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": "pool"}, "spec": {"parentName": "org"}},
        lender,
        cluster_queue_body("batch", [("t4", {GPU: 0})], cohort="pool"),
    ]
    for name in ("lender", "batch"):
        queues.append(
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": "team"},
                "spec": {"clusterQueue": name},
            }
        )
    workloads = [
        _workload("low", "batch", 10, "2026-01-01T00:00:00Z"),
        _workload("owner", "lender", 10, "2026-01-01T00:00:01Z"),
    ]
    return queues, workloads


def through_simulate(queues: list[Obj], workloads: list[Obj]) -> dict[Key, Obj]:
    docs = [*queues, *workloads]
    result = simulate([InputObject(f"#{i}", d) for i, d in enumerate(docs)], {"gpu.nvidia.com": GPU}, NOW)
    return {(w["metadata"]["namespace"], w["metadata"]["name"]): w for w in result.workloads}


def test_simulate_shows_the_victim_as_the_controller_writes_it() -> None:
    queues, workloads = reclamation()
    live = through_controller(queues, workloads)
    offline = through_simulate(queues, workloads)
    victim = live[("team", "low")]["status"]
    # The fixture is not trivial: the controller did preempt, by reclamation across the cohort.
    preempted = {c["type"]: c for c in victim["conditions"]}["Preempted"]
    assert (preempted["status"], preempted["reason"]) == ("True", "InCohortReclamation")
    assert preempted["message"] == (
        "Preempted to accommodate a workload (UID: uid-owner, JobUID: job-uid-owner) due to "
        "reclamation within the cohort; preemptor path: /org/pool/lender; preemptee path: /org/pool/batch"
    )
    assert live[("team", "owner")]["status"]["admission"]["clusterQueue"] == "lender"
    # Every condition (order, reasons, messages, times, generations), admission and requests alike.
    for key in live:
        assert offline[key]["status"] == live[key]["status"], key
