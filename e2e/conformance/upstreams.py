"""The upstream managers a TrainJob scenario runs beside Kueue or the controller
(`trainerController: true`): JobSet's (it makes a JobSet's Jobs) and Kubeflow Trainer's (it
makes each TrainJob's JobSet), each with its webhooks on loopback, stopped together."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from e2e.support.deploy import apply_objects
from e2e.support.jobset import JobSetProcess, jobset_build, jobset_webhooks
from e2e.support.trainer import TrainerProcess, trainer_build, trainer_webhooks
from e2e.support.upstream import UpstreamProcess
from e2e.testbed import KubeClient

__all__ = ["Upstream", "Upstreams", "start_trainer"]


class Upstream(Protocol):
    """What the runner asks of the upstream side: its name, its log's tail, to stop."""

    @property
    def what(self) -> str: ...

    def stop(self, grace: float = 15.0) -> int | None: ...

    def log_tail(self, lines: int = 40) -> str: ...


class Upstreams:
    """Several upstream managers as one (stopped in the reverse of their start)."""

    what = "the JobSet and Kubeflow Trainer managers"

    def __init__(self, processes: Sequence[UpstreamProcess]) -> None:
        self.processes = list(processes)

    def stop(self, grace: float = 15.0) -> int | None:
        for process in reversed(self.processes):
            process.stop(grace)
        return None

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(f"{p.what}:\n{p.log_tail(lines)}" for p in self.processes)


async def start_trainer(kube: KubeClient, kubeconfig: Path, workdir: Path) -> Upstreams:
    """JobSet's manager, then the trainer's (their CRDs installed already), each ready and its
    webhooks registered before the next starts."""
    jobset, trainer = jobset_build(), trainer_build()
    pairs = (
        (JobSetProcess(jobset, kubeconfig, workdir / "jobset"), jobset_webhooks),
        (TrainerProcess(trainer, kubeconfig, workdir / "trainer"), trainer_webhooks),
    )
    started: list[UpstreamProcess] = []
    try:
        for process, hooks in pairs:
            process.start()
            started.append(process)
            await process.wait_ready_async()
            await apply_objects(kube, hooks(process.build, process.webhook_port, process.ca_pem))
    except BaseException:
        Upstreams(started).stop()
        raise
    return Upstreams(started)
