"""examples/fair-sharing, worked through the engine as the controller feeds it: the admissions,
preemptions and weighted shares the README's fair-sharing section tells."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import yaml

from reconciler.api import (
    ClusterQueue,
    Cohort,
    Job,
    LocalQueue,
    Namespace,
    ResourceClaimTemplate,
    ResourceFlavor,
)
from reconciler.config import load_config
from reconciler.core.engine import Engine
from reconciler.core.scheduling.preemption import IN_COHORT_FAIR_SHARING, IN_COHORT_RECLAMATION
from reconciler.core.scheduling.scheduler import Admit, Preempt
from reconciler.feed import QueueObjects, WorkloadSources, compile_for, feed_queue_objects
from reconciler.integrations.batchjob import workload_for_job

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fair-sharing"
KINDS: dict[str, type[Any]] = {
    "Namespace": Namespace,
    "ResourceFlavor": ResourceFlavor,
    "Cohort": Cohort,
    "ClusterQueue": ClusterQueue,
    "LocalQueue": LocalQueue,
    "ResourceClaimTemplate": ResourceClaimTemplate,
    "Job": Job,
}


def load(name: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for doc in yaml.safe_load_all((EXAMPLE / name).read_text()):
        kind = doc["kind"]
        out.setdefault(kind, []).append(msgspec.json.decode(msgspec.json.encode(doc), type=KINDS[kind]))
    return out


class FairSharingExample:
    """The example's cluster: the engine, and what eviction of a preempted workload does."""

    def __init__(self) -> None:
        config = load_config(EXAMPLE / "00-configuration.yaml")
        self.engine = Engine()
        self.engine.scheduler.fair_sharing = config.fair_sharing_strategies
        objects = load("10-queues.yaml")
        broken = feed_queue_objects(
            self.engine,
            QueueObjects(
                flavors=objects["ResourceFlavor"],
                cluster_queues=objects["ClusterQueue"],
                cohorts=objects["Cohort"],
                local_queues=objects["LocalQueue"],
                namespaces=objects["Namespace"],
            ),
        )
        assert broken == {}
        templates = {(t.metadata.namespace, t.metadata.name): t for t in objects["ResourceClaimTemplate"]}
        self.sources = WorkloadSources(dict(config.class_to_resource), templates)
        self.preempted: list[tuple[str, str, str]] = []

    def submit(self, job: Job) -> None:
        info = compile_for(self.engine, workload_for_job(job), self.sources)
        info.name = job.metadata.name  # short names for the assertions
        self.engine.add_workload(info)

    def settle(self) -> list[str]:
        """Schedule until nothing changes; preempted workloads are evicted (their jobs resubmitted)."""
        admitted: list[str] = []
        while decisions := self.engine.schedule():
            evicted = [t for d in decisions if isinstance(d, Preempt) for t in d.targets]
            admitted += [d.key[1] for d in decisions if isinstance(d, Admit)]
            if not evicted and not any(isinstance(d, Admit) for d in decisions):
                break
            for target in evicted:
                self.preempted.append((target.key[1], target.cluster_queue, target.reason))
                info = self.engine.workload(target.key)
                assert info is not None
                self.engine.remove_workload(target.key)
                self.engine.add_workload(info)  # its job is suspended and queued again
        return admitted

    def holding(self, cq: str) -> list[str]:
        return sorted(key[1] for key in self.engine.ledger.holders(cq))

    def shares(self) -> tuple[int, int]:
        return self.engine.share("cq", "team-a").rounded(), self.engine.share("cq", "team-b").rounded()


def test_the_worked_example() -> None:
    cluster = FairSharingExample()
    for job in load("20-team-a-jobs.yaml")["Job"]:
        cluster.submit(job)
    assert cluster.settle() == ["a-1", "a-2", "a-3", "a-4", "a-5", "a-6"]
    assert cluster.shares() == (834, 0)  # 5 borrowed of the 6 the cohort can lend
    for job in load("30-team-b-jobs.yaml")["Job"]:
        cluster.submit(job)
        cluster.settle()
    assert cluster.preempted == [
        # b-1: team-b's own GPU, taken back outright.
        ("a-6", "team-a", IN_COHORT_RECLAMATION),
        # b-2: team-b with it 1 borrowed of 6, /2 = 83; team-a without a-5: 3 of 6 = 500. 83 <= 500.
        ("a-5", "team-a", IN_COHORT_FAIR_SHARING),
        # b-3: 167 <= team-a without a-4: 333.
        ("a-4", "team-a", IN_COHORT_FAIR_SHARING),
        # b-4: 250 > team-a without a-3 (167): refused by LessThanOrEqualToFinalShare; but below
        # team-a's share now (333): LessThanInitialShare, the second strategy, lets it.
        ("a-3", "team-a", IN_COHORT_FAIR_SHARING),
    ]
    assert cluster.holding("team-a") == ["a-1", "a-2"]
    assert cluster.holding("team-b") == ["b-1", "b-2", "b-3", "b-4"]
    # b-5 waits: team-b with it (333) is above team-a now (167) and after (0).
    assert cluster.shares() == (167, 250)
