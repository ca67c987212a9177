"""`reconciler simulate` and `explain` with the Configuration's fair sharing: cohort fair sharing's
preemption and Admission Fair Sharing's order are those of the controller's reconciler for the same
objects (before, both tools ignored fair sharing's strategies, simulate AFS too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from reconciler.api import ClusterQueue, Cohort, LocalQueue, Namespace, ResourceFlavor, Workload
from reconciler.config import parse_config
from reconciler.core.queueing.admission_fair_sharing import AfsSettings
from reconciler.core.scheduling.scheduler import Pending
from reconciler.explain.analyze import explain
from reconciler.explain.quota import load_engine
from reconciler.explain.render import render_text
from reconciler.explain.state import ClusterState, Target
from reconciler.simulate import FairSharing, InputObject, run_simulation, simulate
from tests.support.builders import cluster_queue_body
from tests.support.reconciler_harness import CONFIG, GPU, decode
from tests.support.simulate_controller import KUEUE, NOW, Key, Obj, _workload, through_controller

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "fair-sharing"
STRATEGIES = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


def _queues(cqs: list[Obj], local_queues: dict[str, str], extra: list[Obj] | None = None) -> list[Obj]:
    out: list[Obj] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "t4"}, "spec": {}},
        *(extra or []),
        *cqs,
    ]
    for name, cq in local_queues.items():
        out.append(
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": name, "namespace": "team"},
                "spec": {"clusterQueue": cq},
            }
        )
    return out


def _simulated(docs: list[Obj], fair: FairSharing | None) -> dict[Key, Obj]:
    inputs = [InputObject(f"#{i}", d) for i, d in enumerate(docs)]
    result = simulate(inputs, {"gpu.nvidia.com": GPU}, NOW, fair=fair)
    return {(w["metadata"]["namespace"], w["metadata"]["name"]): w for w in result.workloads}


def _preempted(shown: dict[Key, Obj]) -> dict[str, str]:
    out = {}
    for (_, name), body in shown.items():
        for cond in body["status"].get("conditions", []):
            if cond["type"] == "Preempted" and cond["status"] == "True":
                out[name] = cond["reason"]
    return out


def cohort_case() -> tuple[list[Obj], list[Obj]]:
    """Cohort `fair` lends 2 GPUs; `a` borrows both, then `b` (same weight) wants one."""
    cohort = {
        "apiVersion": KUEUE,
        "kind": "Cohort",
        "metadata": {"name": "fair"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": [GPU],
                    "flavors": [{"name": "t4", "resources": [{"name": GPU, "nominalQuota": 2}]}],
                }
            ]
        },
    }
    cqs = []
    for name in ("a", "b"):
        body = cluster_queue_body(name, [("t4", {GPU: 0})], cohort="fair")
        body["spec"]["preemption"] = {"reclaimWithinCohort": "Any"}
        cqs.append(body)
    workloads = [
        _workload("a1", "a", 0, "2026-01-01T00:00:00Z"),
        _workload("a2", "a", 0, "2026-01-01T00:00:01Z"),
        _workload("b1", "b", 0, "2026-01-01T00:00:02Z"),
    ]
    return _queues(cqs, {"a": "a", "b": "b"}, [cohort]), workloads


def afs_case() -> tuple[list[Obj], list[Obj]]:
    """One ClusterQueue with AFS, 2 GPUs: `heavy` (5 GPUs used lately, in its status) and `light`
    each hold one, light's admitted last; an urgent Workload preempts, from the heavier queue."""
    cq = cluster_queue_body("cq", [("t4", {GPU: 2})])
    cq["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    cq["spec"]["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    queues = _queues([cq], {"heavy": "cq", "light": "cq", "urgent": "cq"})
    heavy = next(q for q in queues if q["metadata"]["name"] == "heavy")
    heavy["status"] = {
        "fairSharing": {
            "weightedShare": 0,
            "admissionFairSharingStatus": {
                "consumedResources": {GPU: "5"},
                "lastUpdate": "2026-01-01T00:00:00Z",
            },
        }
    }
    workloads = [
        _workload("old", "heavy", 0, "2026-01-01T00:00:00Z"),
        _workload("new", "light", 0, "2026-01-01T00:00:01Z"),
        _workload("now", "urgent", 10, "2026-01-01T00:00:02Z"),
    ]
    return queues, workloads


def _config(extra: dict[str, Any]) -> Any:
    return parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "resources": {"deviceClassMappings": [{"name": GPU, "deviceClassNames": ["gpu.nvidia.com"]}]},
            **extra,
        }
    )


@pytest.mark.parametrize(
    ("case", "config", "fair", "victims"),
    [
        (
            cohort_case,
            {"fairSharing": {"preemptionStrategies": list(STRATEGIES)}},
            FairSharing(STRATEGIES),
            {"a2": "InCohortFairSharing"},
        ),
        (cohort_case, {}, None, {}),
        (
            afs_case,
            {"admissionFairSharing": {"usageHalfLifeTime": "10m", "usageSamplingInterval": "5m"}},
            FairSharing(None, AfsSettings(600.0, 300.0, {})),
            {"old": "InClusterQueue"},
        ),
        (afs_case, {}, None, {"new": "InClusterQueue"}),
    ],
    ids=["cohort-fair-sharing", "cohort-classic", "admission-fair-sharing", "afs-off"],
)
def test_simulate_preempts_as_the_controller_does(
    case: Any, config: dict[str, Any], fair: FairSharing | None, victims: dict[str, str]
) -> None:
    queues, workloads = case()
    live = through_controller(queues, workloads, _config(config) if config else CONFIG)
    offline = _simulated([*queues, *workloads], fair)
    assert _preempted(live) == victims  # the fixture shows what fair sharing changes
    for key in live:
        assert offline[key]["status"] == live[key]["status"], key


def test_simulate_reads_fair_sharing_from_the_configuration() -> None:
    manifests = sorted(str(p) for p in EXAMPLE.glob("[1-3]*.yaml"))
    result = run_simulation(str(EXAMPLE / "00-configuration.yaml"), manifests)
    shown = {w["metadata"]["name"].rsplit("-", 1)[0]: w for w in result.workloads}
    preempted = _preempted({("", k): v for k, v in shown.items()})
    # The README's worked example: team-b takes back its GPU, then three more by fair sharing.
    assert preempted == {
        "job-a-6": "InCohortReclamation",
        "job-a-5": "InCohortFairSharing",
        "job-a-4": "InCohortFairSharing",
        "job-a-3": "InCohortFairSharing",
    }
    held = sorted(k for k, w in shown.items() if (w["status"].get("admission") or {}).get("clusterQueue"))
    assert held == ["job-a-1", "job-a-2", "job-b-1", "job-b-2", "job-b-3", "job-b-4"]


def add_queues(state: ClusterState, queues: list[Obj]) -> None:
    """The queue objects (Namespaces, flavors, Cohorts, ClusterQueues, LocalQueues) into explain's state."""
    lists: dict[str, tuple[list[Any], type[Any]]] = {
        "Namespace": (state.namespaces, Namespace),
        "ResourceFlavor": (state.flavors, ResourceFlavor),
        "Cohort": (state.cohorts, Cohort),
        "ClusterQueue": (state.cluster_queues, ClusterQueue),
        "LocalQueue": (state.local_queues, LocalQueue),
    }
    for doc in queues:
        into, kind = lists[doc["kind"]]
        into.append(decode(doc, kind))


@pytest.mark.parametrize(("strategies", "preempts"), [(STRATEGIES, True), (None, False)])
def test_explain_decides_with_the_configured_fair_sharing(
    strategies: tuple[str, ...] | None, preempts: bool
) -> None:
    """explain's verdict for b1 (the cohort case) is the controller's: with fair sharing, b1
    preempts a2; without, it waits (b has no quota of its own to reclaim)."""
    queues, workloads = cohort_case()
    *held, incoming = workloads
    live = through_controller(
        queues, held, _config({"fairSharing": {"preemptionStrategies": list(STRATEGIES)}})
    )
    state = ClusterState(target=Target("workload", "team", "b1"), now=NOW)
    add_queues(state, queues)
    state.workloads = [decode(body, Workload) for body in [*live.values(), incoming]]
    state.fair_sharing = strategies
    target = state.workloads[-1]
    assert [w.status.admission is not None for w in state.workloads] == [True, True, False]
    ledgered = load_engine(state, target, {"gpu.nvidia.com": GPU})
    assert isinstance(ledgered.decision, Pending)
    assert ledgered.decision.message.endswith(". Pending the preemption of 1 workload(s)") is preempts


@pytest.mark.parametrize("fair", [True, False])
def test_explain_shows_the_weighted_shares_compared_in_the_cohort(fair: bool) -> None:
    """a holds both GPUs the Cohort lends (share 1000), b none: a third Workload of a waits, and
    explain shows why with the numbers (only with fair sharing configured)."""
    queues, workloads = cohort_case()
    held = workloads[:2]
    live = through_controller(
        queues, held, _config({"fairSharing": {"preemptionStrategies": list(STRATEGIES)}})
    )
    third = _workload("a3", "a", 0, "2026-01-01T00:00:03Z")
    state = ClusterState(target=Target("workload", "team", "a3"), now=NOW)
    add_queues(state, queues)
    state.workloads = [decode(body, Workload) for body in [*live.values(), third]]
    state.workload = state.workloads[-1]
    state.mappings = {"gpu.nvidia.com": GPU}
    state.fair_sharing = STRATEGIES if fair else None
    ex = explain(state)
    if fair:
        assert ex.cohort_shares == [
            "in Cohort fair, lowest admitted first: ClusterQueue b 0, ClusterQueue a 1000 (its side)"
        ]
        assert "Fair sharing: weighted shares (without this workload):" in render_text(ex)
    else:
        assert ex.cohort_shares == []
