"""Scenarios: YAML step lists under scenarios/.

```yaml
description: one line
configuration: examples/walkthrough/00-configuration.yaml   # relative to the repository
namespaces: [p3-dra-demo]                                     # what snapshots look at
testbed: e2e/conformance/manifests/two-gpus.yaml              # optional test-bed spec
steps:
- apply: [examples/walkthrough/10-queues.yaml]                # files, applied in order
- wait: {job: kueue-dra-running-a, namespace: p3-dra-demo, running: true}
- wait: {job: kueue-dra-pending-b, namespace: p3-dra-demo,
         condition: QuotaReserved, status: "False", reason: Pending}
- delete: [e2e/conformance/manifests/job-a.yaml]              # the files' objects, deleted
- sleep: 2                                                    # let status writes settle
- checkpoint: a-admitted-b-pending                            # snapshot taken here
- expect_rejected: [e2e/conformance/manifests/bad-cq.yaml]    # applied; the API must refuse
```

A `wait` on a Job with `running: true` waits for a ready pod; with `condition` it waits
for that condition on the Job's Workload (`status`, `reason` optional); with neither, for
the Job's Workload to exist. `workload: NAME` instead of `job` names a Workload created
directly (no owner), or a pod group's Workload (named after the group). `pod: NAME` names a
pod of the pod framework: `running: true` waits for it to run, `condition` for that condition
on the Workload it owns. `selector: app=infer` with `running: true` waits until exactly
`count` (default 1) pods it selects run (a Deployment's, whose names are generated).
Without `testbed`, the test-bed's default spec (one node, one T4).
Manifests of the scenarios are in e2e/conformance/manifests/. `within` (seconds,
default 120) bounds every wait. `recordRuns: N` (default 1): `python -m e2e.conformance
--record` runs Kueue N times and keeps every distinct result (for scenarios where Kueue's
own result varies from run to run). `visibility: true`: the manager's visibility API (Kueue's
visibility server, the controller's) is registered with the API server's aggregation layer and
every checkpoint holds each queue's pending workloads as that API lists them (snapshot_visibility.py).

`expect_rejected` applies each object of its files as `apply` does but expects the API to
refuse it (an admission webhook, a CRD's schema): the next checkpoint holds
`Rejected[KIND/NAME]` (`KIND/NAMESPACE/NAME` when namespaced) with the API's answer,
`HTTP <status> <reason>: <message>`, or `accepted` when the object was stored.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.support.deploy import ROOT

SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"


@dataclass(frozen=True)
class Wait:
    namespace: str
    job: str | None = None
    workload: str | None = None  # a Workload created directly, by name
    pod: str | None = None  # a pod of the pod framework (its Workload: the one it owns)
    selector: str | None = None  # pods by label selector (a Deployment's): `count` of them running
    count: int = 1
    running: bool = False
    condition: str | None = None
    status: str | None = None
    reason: str | None = None
    within: float = 120.0

    def __post_init__(self) -> None:
        if sum(name is not None for name in (self.job, self.workload, self.pod, self.selector)) != 1:
            raise ValueError(f"a wait names exactly one of job, workload, pod, selector: {self}")
        if self.selector is not None and (not self.running or self.condition is not None):
            raise ValueError(f"a wait on a selector waits for running pods only: {self}")
        if self.workload is not None and self.running:
            raise ValueError(f"running: true needs a job or a pod, not a workload: {self}")


@dataclass(frozen=True)
class Step:
    apply: tuple[Path, ...] = ()
    delete: tuple[Path, ...] = ()
    expect_rejected: tuple[Path, ...] = ()  # applied; the API's refusal is compared
    wait: Wait | None = None
    sleep: float = 0.0
    checkpoint: str | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    configuration: Path
    namespaces: tuple[str, ...]
    steps: tuple[Step, ...] = field(default_factory=tuple)
    testbed: Path | None = None  # a test-bed spec; None: the default spec
    record_runs: int = 1  # runs of Kueue per `--record` (more where Kueue's result varies)
    # The real JobSet manager runs beside the manager under test (the JobSet scenarios without it
    # install the CRD alone: nothing makes a JobSet's Jobs).
    jobset_controller: bool = False
    # The real Kubeflow Trainer manager runs beside it, with JobSet's (it makes each TrainJob's
    # JobSet, JobSet its Jobs).
    trainer_controller: bool = False
    # The manager's visibility API is served and read at each checkpoint (snapshot_visibility.py).
    visibility: bool = False

    @property
    def runs_jobsets(self) -> bool:
        """Whether JobSet's manager runs (for a JobSet's or a TrainJob's Jobs)."""
        return self.jobset_controller or self.trainer_controller


def _step(raw: dict[str, Any], where: str) -> Step:
    if len(raw) != 1:
        raise ValueError(
            f"{where}: a step has exactly one of apply, delete, expect_rejected, wait, sleep, checkpoint"
        )
    ((kind, value),) = raw.items()
    if kind in ("apply", "delete"):
        paths = _files(value, where)
        return Step(apply=paths) if kind == "apply" else Step(delete=paths)
    if kind == "expect_rejected":
        return Step(expect_rejected=_files(value, where))
    if kind == "wait":
        return Step(wait=Wait(**value))
    if kind == "sleep":
        return Step(sleep=float(value))
    if kind == "checkpoint":
        return Step(checkpoint=str(value))
    raise ValueError(f"{where}: unknown step {kind!r}")


def _files(value: str | list[str], where: str) -> tuple[Path, ...]:
    files = [value] if isinstance(value, str) else list(value)
    paths = tuple(ROOT / f for f in files)
    for p in paths:
        if not p.is_file():
            raise ValueError(f"{where}: no such file {p}")
    return paths


def load_scenario(path: Path) -> Scenario:
    raw = yaml.safe_load(path.read_text())
    steps = tuple(_step(s, f"{path.name} step {i + 1}") for i, s in enumerate(raw["steps"]))
    return Scenario(
        name=path.stem,
        description=str(raw.get("description", "")),
        configuration=ROOT / raw["configuration"],
        namespaces=tuple(raw["namespaces"]),
        steps=steps,
        testbed=_files(raw["testbed"], f"{path.name} testbed")[0] if "testbed" in raw else None,
        record_runs=_record_runs(raw.get("recordRuns", 1), path.name),
        jobset_controller=_flag(raw.get("jobsetController", False), "jobsetController", path.name),
        trainer_controller=_flag(raw.get("trainerController", False), "trainerController", path.name),
        visibility=_flag(raw.get("visibility", False), "visibility", path.name),
    )


def _flag(value: Any, name: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{where}: {name} must be true or false, not {value!r}")
    return value


def _record_runs(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(
            f"{where}: recordRuns must be a whole number >= 1 (runs of Kueue per recording), not {value!r}"
        )
    return value


def all_scenarios() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SCENARIO_DIR.glob("*.yaml"))}
