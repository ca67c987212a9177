"""The dry run of `reconciler explain --what-if`: a snapshot of the cluster (here, what `simulate`
shows after the conformance scenario's first step: low-a admitted on the only GPUs) and a file of
new objects; the verdict says whether each would be admitted now, where, and whom it would
preempt."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from reconciler.config import load_config
from reconciler.simulate import InputObject, collect_objects, render_what_if, settings_of, simulate, what_if

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "e2e" / "conformance" / "manifests"
CONFIG = MANIFESTS / "configuration.yaml"
NOW = "2026-12-07T12:00:00Z"
QUEUES = [
    MANIFESTS / "preemption-queues.yaml",
    ROOT / "examples" / "walkthrough" / "20-resourceclaimtemplate.yaml",
    MANIFESTS / "priority-classes.yaml",
]


def _snapshot(*jobs: Path) -> list[InputObject]:
    """The queue objects and the Workloads `simulate` shows once `jobs` arrived: a cluster's state."""
    queue_objects = collect_objects([str(p) for p in QUEUES])
    settings = settings_of(load_config(str(CONFIG)))
    result = simulate(
        [*queue_objects, *collect_objects([str(p) for p in jobs])],
        settings.mappings,
        "2026-12-07T11:00:00Z",
        frameworks=settings.frameworks,
    )
    workloads = [InputObject("cluster", w) for w in result.workloads]
    return [*queue_objects, *workloads]


def _asked(tmp_path: Path, body: dict[str, Any]) -> list[InputObject]:
    file = tmp_path / "what-if.yaml"
    file.write_text(yaml.safe_dump(body))
    return collect_objects([str(file)])


def test_a_high_priority_job_would_be_admitted_by_preempting_the_running_low_one(tmp_path: Path) -> None:
    snapshot = _snapshot(MANIFESTS / "preemption-low-a.yaml")
    (low,) = [o for o in snapshot if o.body["kind"] == "Workload"]
    assert low.body["status"]["admission"]["clusterQueue"]  # low-a holds the GPUs
    asked = collect_objects([str(MANIFESTS / "preemption-high-c.yaml")])
    verdicts, warnings = what_if(snapshot, asked, settings_of(load_config(str(CONFIG))), NOW)
    assert warnings == []
    (verdict,) = verdicts
    assert verdict.admitted, verdict
    assert verdict.cluster_queue == low.body["status"]["admission"]["clusterQueue"]
    assert [(v.name, v.reason) for v in verdict.preempts] == [
        (low.body["metadata"]["name"], "InClusterQueue")
    ]
    text = render_what_if(verdicts, warnings, "text")
    assert "would be admitted now to ClusterQueue" in text
    assert "by preempting 1 workload(s)" in text


def test_a_job_of_the_same_priority_would_wait_with_the_schedulers_message(tmp_path: Path) -> None:
    snapshot = _snapshot(MANIFESTS / "preemption-low-a.yaml")
    low = yaml.safe_load((MANIFESTS / "preemption-low-a.yaml").read_text())
    low["metadata"]["name"] = "low-b"
    verdicts, _ = what_if(snapshot, _asked(tmp_path, low), settings_of(load_config(str(CONFIG))), NOW)
    (verdict,) = verdicts
    assert not verdict.admitted
    assert verdict.preempts == []
    assert "insufficient unused quota" in verdict.waiting, verdict.waiting
    assert "would wait: couldn't assign flavors" in render_what_if(verdicts, [], "text")


def test_the_snapshot_is_not_changed_and_finished_workloads_hold_nothing(tmp_path: Path) -> None:
    snapshot = _snapshot(MANIFESTS / "preemption-low-a.yaml")
    for obj in snapshot:
        if obj.body["kind"] == "Workload":
            conditions = obj.body["status"]["conditions"]
            conditions.append({"type": "Finished", "status": "True", "reason": "Succeeded", "message": ""})
    low = yaml.safe_load((MANIFESTS / "preemption-low-a.yaml").read_text())
    low["metadata"]["name"] = "low-b"
    verdicts, _ = what_if(snapshot, _asked(tmp_path, low), settings_of(load_config(str(CONFIG))), NOW)
    (verdict,) = verdicts
    assert verdict.admitted
    assert verdict.preempts == []


def test_an_object_that_would_not_be_queued_says_why(tmp_path: Path) -> None:
    low = yaml.safe_load((MANIFESTS / "preemption-low-a.yaml").read_text())
    del low["metadata"]["labels"]
    verdicts, warnings = what_if(
        _snapshot(), _asked(tmp_path, low), settings_of(load_config(str(CONFIG))), NOW
    )
    assert verdicts == []
    assert any("no kueue.x-k8s.io/queue-name label" in w for w in warnings), warnings
    assert "nothing in the file would be queued" in render_what_if(verdicts, warnings, "text")
