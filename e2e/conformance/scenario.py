"""Scenarios: YAML step lists under scenarios/.

```yaml
description: one line
configuration: examples/walkthrough/00-configuration.yaml   # relative to the repository
namespaces: [p3-dra-demo]                                     # what snapshots look at
steps:
- apply: [examples/walkthrough/10-queues.yaml]                # files, applied in order
- wait: {job: kueue-dra-running-a, namespace: p3-dra-demo, running: true}
- wait: {job: kueue-dra-pending-b, namespace: p3-dra-demo,
         condition: QuotaReserved, status: "False", reason: Pending}
- sleep: 2                                                    # let status writes settle
- checkpoint: a-admitted-b-pending                            # snapshot taken here
```

A `wait` on a Job with `running: true` waits for a ready pod; with `condition` it waits
for that condition on the Job's Workload (`status`, `reason` optional); with neither, for
the Job's Workload to exist. Manifests of the scenarios are in e2e/conformance/manifests/. `within` (seconds,
default 120) bounds every wait.
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
    job: str
    namespace: str
    running: bool = False
    condition: str | None = None
    status: str | None = None
    reason: str | None = None
    within: float = 120.0


@dataclass(frozen=True)
class Step:
    apply: tuple[Path, ...] = ()
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


def _step(raw: dict[str, Any], where: str) -> Step:
    if len(raw) != 1:
        raise ValueError(f"{where}: a step has exactly one of apply, wait, sleep, checkpoint")
    ((kind, value),) = raw.items()
    if kind == "apply":
        files = [value] if isinstance(value, str) else list(value)
        paths = tuple(ROOT / f for f in files)
        for p in paths:
            if not p.is_file():
                raise ValueError(f"{where}: no such file {p}")
        return Step(apply=paths)
    if kind == "wait":
        return Step(wait=Wait(**value))
    if kind == "sleep":
        return Step(sleep=float(value))
    if kind == "checkpoint":
        return Step(checkpoint=str(value))
    raise ValueError(f"{where}: unknown step {kind!r}")


def load_scenario(path: Path) -> Scenario:
    raw = yaml.safe_load(path.read_text())
    steps = tuple(_step(s, f"{path.name} step {i + 1}") for i, s in enumerate(raw["steps"]))
    return Scenario(
        name=path.stem,
        description=str(raw.get("description", "")),
        configuration=ROOT / raw["configuration"],
        namespaces=tuple(raw["namespaces"]),
        steps=steps,
    )


def all_scenarios() -> dict[str, Path]:
    return {p.stem: p for p in sorted(SCENARIO_DIR.glob("*.yaml"))}
