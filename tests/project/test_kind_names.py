"""No module outside reconciler/integrations/ and reconciler/api/ names a specific kind of job:
everything else reads the kinds from the registry (`reconciler.integrations.REGISTRATIONS`).

Checked by AST: a string that is a kind's name, API version or framework name, a name that is a
kind's API type, resource, integration or constant, and an import of a kind's own module.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reconciler"
FREE = (PACKAGE / "integrations", PACKAGE / "api")

KIND_STRINGS = frozenset(
    {
        "Job",
        "JobSet",
        "LeaderWorkerSet",
        "batch/v1",
        "jobset.x-k8s.io/v1alpha2",
        "leaderworkerset.x-k8s.io/v1",
        "batch/job",
        "jobset.x-k8s.io/jobset",
        "leaderworkerset.x-k8s.io/leaderworkerset",
        "Deployment",
        "StatefulSet",
        "statefulset",
        "deployment",
        "TrainJob",
        "trainer.kubeflow.org/v1alpha1",
        "trainer.kubeflow.org/trainjob",
    }
)
KIND_NAMES = frozenset(
    {
        "Job",
        "JobSet",
        "LeaderWorkerSet",
        "JOBS",
        "JOBSETS",
        "LEADERWORKERSETS",
        "BATCH_JOB",
        "JOBSET",
        "LEADER_WORKER_SET",
        "POD",
        "STATEFULSETS",
        "STATEFUL_SET",
        "TRAINJOB",
        "TRAINJOBS",
    }
)
KIND_MODULES = (
    "reconciler.integrations.batchjob",
    "reconciler.integrations.jobset",
    "reconciler.integrations.lws",
    "reconciler.integrations.pods",
    "reconciler.integrations.apps",
    "reconciler.api.apps",
    "reconciler.api.jobset",
    "reconciler.api.lws",
    "reconciler.integrations.trainjob",
    "reconciler.api.trainer",
)

# Where a kind is still named outside the integrations, and why. Each entry is a module and the
# reason; the list only shrinks.
_EXPLAIN = (
    "`reconciler explain job` reads batch/v1 Jobs; a job of another kind is explained through its "
    "Workload (`explain workload`) until explain takes each kind's own name from the registry"
)
_POD_WRITTEN = (
    "the kinds whose jobs are written through their pods (LeaderWorkerSet groups, pod groups) still "
    "have runtime code of their own; they move behind one capability of the registration next"
)
ALLOWED: dict[str, str] = {
    # Kueue's vocabulary of framework names: the Configuration checks names against Kueue's own.
    "reconciler/config_sections/frameworks.py": "Kueue's framework names, not this build's kinds",
    "reconciler/explain/analyze.py": _EXPLAIN,
    "reconciler/explain/fetch.py": _EXPLAIN,
    "reconciler/explain/pods.py": _EXPLAIN,
    "reconciler/explain/quota.py": _EXPLAIN,
    "reconciler/explain/state.py": _EXPLAIN,
    # Not a job: the controller's own Deployment, on which the unimplemented-frameworks Event goes.
    "reconciler/runtime/loop/notices.py": "the controller's own Deployment, not a kind of job",
    "reconciler/runtime/jobs/lws.py": _POD_WRITTEN,
    "reconciler/runtime/jobs/podgroups.py": _POD_WRITTEN,
    "reconciler/runtime/jobs/podgroup_writes.py": _POD_WRITTEN,
    "reconciler/runtime/loop/reconciler.py": _POD_WRITTEN,
    "reconciler/runtime/shared/evictions.py": _POD_WRITTEN,
    "reconciler/runtime/shared/store.py": _POD_WRITTEN,
    "reconciler/runtime/workloads/pods_ready.py": _POD_WRITTEN,
    "reconciler/simulate/run.py": _POD_WRITTEN + "; simulate makes their Workloads the same way",
}


def _problems(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in KIND_STRINGS:
            yield f"line {node.lineno}: the string {node.value!r}"
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(KIND_MODULES):
                yield f"line {node.lineno}: imports {node.module}"
            for alias in node.names:
                if alias.name in KIND_NAMES:
                    yield f"line {node.lineno}: imports {alias.name} from {node.module}"
        elif isinstance(node, ast.Name) and node.id in KIND_NAMES:
            yield f"line {node.lineno}: the name {node.id}"


def _outside() -> Iterator[Path]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if not any(free in path.parents for free in FREE):
            yield path


def test_no_module_outside_the_integrations_and_the_api_names_a_kind() -> None:
    found = {}
    for path in _outside():
        rel = path.relative_to(ROOT).as_posix()
        problems = sorted(set(_problems(path)))
        if problems and rel not in ALLOWED:
            found[rel] = problems
    assert not found, "\n".join(f"{rel}: {', '.join(p)}" for rel, p in found.items())


def test_every_allowed_module_still_names_a_kind() -> None:
    stale = [rel for rel in ALLOWED if not list(_problems(ROOT / rel))]
    assert not stale, f"no longer naming a kind, take them off ALLOWED: {stale}"


def test_the_check_finds_a_kind_named_in_each_way(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from reconciler.integrations.jobset import JOBSET\n"
        "from reconciler.api import Job\n"
        "KIND = 'LeaderWorkerSet'\n"
        "x = BATCH_JOB\n"
    )
    found = list(_problems(sample))
    assert len(found) >= 4, found
