"""One scenario on a fresh test-bed with one implementation: Kueue or `reconciler run`."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any, Literal, Protocol, cast

import yaml

from e2e.conformance.groups import GroupNamed
from e2e.conformance.kueue import (
    KUEUE_CONVERSION_CRDS,
    LWS_WEBHOOK_GROUPS,
    WEBHOOK_GROUPS,
    KueueProcess,
    kueue_build,
    webhook_configurations,
)
from e2e.conformance.podhooks import create_namespaces, is_pod_hook, scoped_to, wait_until_pods_are_gated
from e2e.conformance.scenario import Scenario, Wait
from e2e.conformance.snapshot import KUEUE, take_snapshot
from e2e.conformance.snapshot_appwrapper import enables_appwrapper, take_appwrapper_snapshot
from e2e.conformance.snapshot_fair import enables_fair_sharing, take_fair_snapshot
from e2e.conformance.snapshot_jobset import take_jobset_snapshot
from e2e.conformance.snapshot_kubeflow import take_kubeflow_snapshot
from e2e.conformance.snapshot_pods import enables_pods, take_pod_snapshot
from e2e.conformance.snapshot_serving import enables_serving, take_serving_snapshot
from e2e.conformance.snapshot_visibility import take_visibility_snapshot
from e2e.conformance.upstreams import Upstream, start_trainer
from e2e.support.aggregation import register_visibility
from e2e.support.appwrapper import install_appwrapper_crds
from e2e.support.deploy import (
    ControllerProcess,
    Discovery,
    apply_objects,
    free_port,
    install_crds,
    load_documents,
)
from e2e.support.jobset import (
    JobSetProcess,
    enables_jobset,
    install_jobset_crds,
    jobset_build,
    jobset_webhooks,
    read_only_access,
    read_only_kubeconfig,
)
from e2e.support.kubeflow import KubeflowOperators, enables_kubeflow, install_kubeflow_crds
from e2e.support.kuberay import enables_ray, install_kuberay_crds
from e2e.support.lws import LwsProcess, enables_lws, install_lws_crds, lws_build, lws_webhooks
from e2e.support.trainer import enables_trainjob, install_trainer_crds
from e2e.support.upstream import UpstreamProcess
from e2e.support.webhooks import (
    conversion_on_loopback,
    on_loopback,
    shipped_configurations,
    wait_until_jobs_are_suspended,
)
from e2e.testbed import ApiError, KubeClient, Testbed, api_path
from e2e.testbed.spec import load_spec
from reconciler.webhook.certmanager import CONVERSION_CRDS

Implementation = Literal["kueue", "ours"]
Snapshots = dict[str, dict[str, Any]]
Obj = dict[str, Any]
# A namespace every Job webhook (Kueue's and the controller's) covers, for the readiness probe.
PROBE_NAMESPACE = "default"


class Manager(Protocol):
    def stop(self, grace: float = 15.0) -> int | None: ...
    def log_tail(self, lines: int = 40) -> str: ...


class _WithLws:
    """The implementation's manager and an upstream one (LeaderWorkerSet's, JobSet's, the trainer's
    or the Kubeflow operators), stopped together (the upstream one last)."""

    def __init__(self, manager: Manager, lws: Upstream | None) -> None:
        self.manager, self.lws = manager, lws

    def stop(self, grace: float = 15.0) -> int | None:
        code = self.manager.stop(grace)
        if self.lws is not None:
            self.lws.stop(grace)
        return code

    def log_tail(self, lines: int = 40) -> str:
        tail = self.manager.log_tail(lines)
        return tail if self.lws is None else f"{tail}\n{self.lws.what} log tail:\n{self.lws.log_tail(lines)}"


def _webhook_groups(scenario: Scenario) -> frozenset[str]:
    """The API groups whose webhooks both sides register: `batch` and `kueue.x-k8s.io`, plus
    those of the frameworks the scenario enables (`jobset.x-k8s.io` with the jobset one)."""
    configuration = scenario.configuration
    groups = WEBHOOK_GROUPS
    if enables_kubeflow(configuration):
        groups |= {"kubeflow.org"}
    elif enables_serving(configuration):
        groups |= {"apps"}  # the Deployment and StatefulSet webhooks
    elif enables_trainjob(configuration):  # the TrainJob webhooks too
        groups |= {"trainer.kubeflow.org"}
    elif enables_lws(configuration):
        groups = LWS_WEBHOOK_GROUPS
    if enables_jobset(configuration):
        groups |= {"jobset.x-k8s.io"}
    if enables_appwrapper(configuration):
        groups |= {"workload.codeflare.dev"}
    return groups


async def _install_integration_crds(kube: KubeClient, scenario: Scenario) -> None:
    """JobSet's, LeaderWorkerSet's, Kubeflow's, KubeRay's and AppWrapper's CRDs where the scenario
    enables them (before a manager starts, so its integration is set up)."""
    if enables_jobset(scenario.configuration):
        await install_jobset_crds(kube)
    if enables_trainjob(scenario.configuration):
        await install_trainer_crds(kube)
    if enables_lws(scenario.configuration):
        await install_lws_crds(kube)
    if enables_kubeflow(scenario.configuration):
        await install_kubeflow_crds(kube)
    if enables_ray(scenario.configuration):
        await install_kuberay_crds(kube)
    if enables_appwrapper(scenario.configuration):
        await install_appwrapper_crds(kube)


async def _start_upstream(
    kube: KubeClient, bed: Testbed, scenario: Scenario, workdir: Path
) -> Upstream | None:
    """The Kubeflow operators where the scenario enables a Kubeflow framework, else `_start_lws`."""
    if not enables_kubeflow(scenario.configuration):
        return await _start_lws(kube, bed, scenario, workdir)
    operators = KubeflowOperators(bed.kubeconfig, workdir / "kubeflow")
    await operators.start(kube)
    return operators


async def _start_lws(kube: KubeClient, bed: Testbed, scenario: Scenario, workdir: Path) -> Upstream | None:
    """LeaderWorkerSet's manager and its webhooks where the scenario enables the framework, or
    JobSet's where it enables JobSet's (read-only unless the scenario asks for its controller,
    `jobsetController: true`: its webhooks act, its controllers write nothing), or JobSet's and
    the trainer's (`trainerController: true`)."""
    if scenario.trainer_controller:
        return await start_trainer(kube, bed.kubeconfig, workdir)
    upstream: UpstreamProcess
    if enables_lws(scenario.configuration):
        build = lws_build()
        upstream = LwsProcess(build, bed.kubeconfig, workdir / "lws")
        hooks = lws_webhooks
    elif scenario.jobset_controller or enables_jobset(scenario.configuration):
        build = jobset_build()
        kubeconfig = bed.kubeconfig
        if not scenario.jobset_controller:
            await apply_objects(kube, read_only_access())
            kubeconfig = read_only_kubeconfig(bed.kubeconfig, workdir / "jobset" / "read-only.kubeconfig")
        upstream = JobSetProcess(build, kubeconfig, workdir / "jobset")
        hooks = jobset_webhooks
    else:
        return None
    upstream.start()
    try:
        await upstream.wait_ready_async()
        await apply_objects(kube, hooks(build, upstream.webhook_port, upstream.ca_pem))
    except BaseException:
        upstream.stop()
        raise
    return upstream


async def _workload_of(kube: KubeClient, namespace: str, job: str) -> dict[str, Any] | None:
    for wl in (await kube.get(api_path(KUEUE, "workloads", namespace)))["items"]:
        if any(r.get("name") == job for r in wl["metadata"].get("ownerReferences") or []):
            return dict(wl)
    return None


async def _waited_workload(kube: KubeClient, wait: Wait) -> dict[str, Any] | None:
    if wait.workload is not None:
        return await kube.get_or_none(api_path(KUEUE, "workloads", wait.namespace, wait.workload))
    owner = wait.job if wait.job is not None else wait.pod
    assert owner is not None
    return await _workload_of(kube, wait.namespace, owner)


async def _running_selected(kube: KubeClient, wait: Wait) -> int:
    found = await kube.get(
        api_path("v1", "pods", wait.namespace), params={"labelSelector": wait.selector or ""}
    )
    return sum(
        1
        for p in found["items"]
        if (p.get("status") or {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    )


async def _satisfied(kube: KubeClient, wait: Wait) -> bool:
    if wait.selector is not None:
        return await _running_selected(kube, wait) == wait.count
    if wait.running and wait.pod is not None:
        pod = await kube.get_or_none(api_path("v1", "pods", wait.namespace, wait.pod))
        if not pod or (pod.get("status") or {}).get("phase") != "Running":
            return False
    elif wait.running:
        assert wait.job is not None
        job = await kube.get_or_none(api_path("batch/v1", "jobs", wait.namespace, wait.job))
        if not job or job["spec"].get("suspend") or not (job.get("status") or {}).get("ready", 0):
            return False
    if wait.condition is None:
        return wait.running or await _waited_workload(kube, wait) is not None
    if wait.condition is not None:
        wl = await _waited_workload(kube, wait)
        conditions = ((wl or {}).get("status") or {}).get("conditions") or []
        cond = next((c for c in conditions if c.get("type") == wait.condition), None)
        if cond is None:
            return False
        if wait.status is not None and cond.get("status") != wait.status:
            return False
        if wait.reason is not None and cond.get("reason") != wait.reason:
            return False
    return True


async def _satisfied_yet(kube: KubeClient, wait: Wait) -> bool:
    try:
        return await _satisfied(kube, wait)
    except ApiError as err:
        # A CRD just installed answers 429 "storage is (re)initializing" for a moment.
        if err.status in (429, 503):
            return False
        raise


async def _wait(kube: KubeClient, wait: Wait) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait.within
    while not await _satisfied_yet(kube, wait):
        if loop.time() > deadline:
            raise TimeoutError(f"timed out after {wait.within:.0f}s waiting for {wait}")
        await asyncio.sleep(0.5)


async def _delete_objects(kube: KubeClient, objects: list[dict[str, Any]]) -> None:
    """Deletes as kubectl does (background propagation); already gone is fine."""
    discovery = Discovery(kube)
    for obj in objects:
        try:
            await kube.delete(await discovery.path(obj), params={"propagationPolicy": "Background"})
        except ApiError as err:
            if err.status != 404:
                raise


def _rejection_key(obj: Obj) -> str:
    where = f"{obj['metadata']['namespace']}/" if obj["metadata"].get("namespace") else ""
    return f"Rejected[{obj['kind']}/{where}{obj['metadata']['name']}]"


async def _rejections(kube: KubeClient, paths: tuple[Path, ...]) -> dict[str, str]:
    """Applies each object expecting the API to refuse it: `Rejected[KIND/NAME]` is the answer
    (`HTTP <status> <reason>: <message>`), or `accepted` when it was stored."""
    out: dict[str, str] = {}
    discovery = Discovery(kube)
    for path in paths:
        for obj in load_documents(path):
            try:
                await kube.apply(await discovery.path(obj), obj, "dra-quota-e2e")
            except ApiError as err:
                message = err.body.get("message", "") if isinstance(err.body, dict) else str(err.body)
                out[_rejection_key(obj)] = f"HTTP {err.status} {err.reason}: {message}"
            else:
                out[_rejection_key(obj)] = "accepted"
    return out


async def _steps(kube: KubeClient, scenario: Scenario) -> Snapshots:
    snapshots: Snapshots = {}
    rejected: dict[str, str] = {}  # shown at the next checkpoint
    for step in scenario.steps:
        for path in step.apply:
            await apply_objects(kube, load_documents(path))
        for path in step.delete:
            await _delete_objects(kube, load_documents(path))
        rejected.update(await _rejections(kube, step.expect_rejected))
        if step.wait is not None:
            await _wait(kube, step.wait)
        if step.sleep:
            await asyncio.sleep(step.sleep)
        if step.checkpoint is not None:
            snapshots[step.checkpoint] = {**await _snapshot(kube, scenario), **rejected}
            rejected = {}
    return snapshots


async def _snapshot(kube: KubeClient, scenario: Scenario, within: float = 30.0) -> dict[str, Any]:
    """take_snapshot (take_pod_snapshot for a scenario with the pod framework, take_fair_snapshot
    for one with cohort fair sharing), tried again while
    the API answers 429/503: a CRD installed a moment ago answers "storage is (re)initializing"
    (seen at a checkpoint right after the first apply)."""
    take = take_snapshot
    if enables_serving(scenario.configuration):
        take = take_serving_snapshot
    elif enables_pods(scenario.configuration):
        take = take_pod_snapshot
    elif enables_fair_sharing(scenario.configuration):
        take = take_fair_snapshot
    elif scenario.runs_jobsets or enables_jobset(scenario.configuration):
        take = take_jobset_snapshot
    elif enables_kubeflow(scenario.configuration):
        take = take_kubeflow_snapshot
    elif enables_appwrapper(scenario.configuration):
        take = take_appwrapper_snapshot
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        try:
            # LeaderWorkerSet groups' Workloads named apart (e2e/conformance/groups.py)
            taken = await take(cast(KubeClient, GroupNamed(kube)), scenario.namespaces)
            if scenario.visibility:
                taken.update(await take_visibility_snapshot(kube, scenario.namespaces))
            return taken
        except ApiError as err:
            if err.status not in (429, 503) or loop.time() > deadline:
                raise
        await asyncio.sleep(0.5)


KUEUE_PLURALS = (
    "resourceflavors",
    "cohorts",
    "clusterqueues",
    "localqueues",
    "workloads",
    "workloadpriorityclasses",
)


async def _watch_accepted(kube: KubeClient, path: str) -> bool:
    """False while the API server answers a watch of `path` with 429/503; True once it streams."""
    events = kube.watch(path, {}, timeout_seconds=5)
    try:
        await asyncio.wait_for(anext(events), 0.5)
    except (TimeoutError, StopAsyncIteration):
        pass  # streaming (or ended): accepted
    except ApiError as err:
        if err.status in (429, 503):
            return False
        raise
    finally:
        await events.aclose()
    return True


async def _watch_caches_ready(kube: KubeClient, within: float = 30.0) -> None:
    """Until the API server accepts watches of Kueue's kinds: a CRD installed a moment ago answers
    them with 429 "storage is (re)initializing", and a manager started then waits a second or
    more before it watches that kind (seen: Cohorts applied meanwhile were missed, and two
    Workloads were found to fit no quota)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    for plural in KUEUE_PLURALS:
        while not await _watch_accepted(kube, api_path(KUEUE, plural)):
            if loop.time() > deadline:
                raise TimeoutError(f"the API server still refuses watches of {plural} after {within:.0f}s")
            await asyncio.sleep(0.2)


async def _pod_namespaces(kube: KubeClient, scenario: Scenario) -> tuple[str, ...]:
    """A scenario with the pod framework: its namespaces, created (the pod webhooks are scoped
    to them and probed in the first); otherwise none."""
    if not enables_pods(scenario.configuration) and not enables_serving(scenario.configuration):
        return ()
    await create_namespaces(kube, scenario.namespaces)
    return scenario.namespaces


async def _webhooks_called(kube: KubeClient, pod_namespaces: tuple[str, ...], scenario: Scenario) -> None:
    """Until the API server calls the Job webhook (and, with the pod framework, the pod webhook)."""
    await wait_until_jobs_are_suspended(kube, PROBE_NAMESPACE)
    if pod_namespaces:
        # With `pod` only implied by a serving framework, the probe is one of its pods.
        parent = "deployment" if enables_serving(scenario.configuration) else None
        await wait_until_pods_are_gated(kube, pod_namespaces[0], parent=parent)


async def _with_kueue(bed: Testbed, scenario: Scenario, workdir: Path) -> tuple[Snapshots, Manager]:
    build = kueue_build()
    missing = build.missing()
    if missing:
        raise FileNotFoundError(f"Kueue is not built ({missing[0]}): run e2e/build-binaries.sh --kueue")
    base = yaml.safe_load(scenario.configuration.read_text())
    kueue = KueueProcess(build, bed.kubeconfig, workdir, base, visibility=scenario.visibility)
    async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
        crds = [yaml.safe_load(p.read_text()) for p in sorted(build.crds.glob("*.yaml"))]
        await apply_objects(kube, crds)
        await _install_integration_crds(kube, scenario)
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}
        await apply_objects(kube, [namespace])
        pod_namespaces = await _pod_namespaces(kube, scenario)
        await _watch_caches_ready(kube)
        lws = await _start_upstream(kube, bed, scenario, workdir)
        manager = _WithLws(kueue, lws)
        kueue.start(bed.pki.serving_cert, bed.pki.serving_key)
        try:
            await kueue.wait_ready_async()
            ca = bed.pki.ca_cert.read_bytes()
            hooks = webhook_configurations(
                build.webhooks, kueue.webhook_port, ca, _webhook_groups(scenario), pod_namespaces
            )
            await apply_objects(kube, hooks)
            await conversion_on_loopback(kube, KUEUE_CONVERSION_CRDS, kueue.webhook_port, ca)
            if kueue.visibility_port is not None:
                await register_visibility(kube, kueue.visibility_port)
            await _webhooks_called(kube, pod_namespaces, scenario)
            return await _steps(kube, scenario), manager
        except BaseException as err:
            tail = manager.log_tail()
            manager.stop()
            raise RuntimeError(f"{err}\nkueue log tail:\n{tail}") from err


def our_webhooks(
    port: int, ca_pem: bytes, groups: frozenset[str] = WEBHOOK_GROUPS, pod_namespaces: tuple[str, ...] = ()
) -> list[Obj]:
    """The controller's shipped webhook configurations on 127.0.0.1:port, keeping only the
    webhooks of the API groups registered for Kueue (`groups`), so both sides are called
    for the same objects; with `pod_namespaces` its pod webhooks too, scoped as Kueue's."""
    out = []
    for configuration in on_loopback(shipped_configurations(), port, ca_pem):
        hooks = [
            scoped_to(hook, pod_namespaces) if pod_namespaces and is_pod_hook(hook) else hook
            for hook in configuration["webhooks"]
            if {g for rule in hook["rules"] for g in rule["apiGroups"]} <= groups
            or (pod_namespaces and is_pod_hook(hook))
        ]
        if hooks:
            out.append({**configuration, "webhooks": hooks})
    return out


def _our_process(bed: Testbed, scenario: Scenario, workdir: Path) -> ControllerProcess:
    """`reconciler run` with the scenario's Configuration and, as Kueue here, internal cert
    management off and its webhooks served on a loopback port with the test-bed's serving
    certificate (valid for 127.0.0.1)."""
    cert_dir = workdir / "certs"
    cert_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bed.pki.serving_cert, cert_dir / "tls.crt")
    shutil.copyfile(bed.pki.serving_key, cert_dir / "tls.key")
    config = {
        **yaml.safe_load(scenario.configuration.read_text()),
        "internalCertManagement": {"enable": False},
    }
    config_path = workdir / "controller-config.yaml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    log = workdir / "controller.log"
    return ControllerProcess(
        config_path,
        bed.kubeconfig,
        log,
        "--webhook-cert-dir",
        str(cert_dir),
        webhook_port=free_port(),
        visibility_port=free_port() if scenario.visibility else None,
    )


async def _with_ours(bed: Testbed, scenario: Scenario, workdir: Path) -> tuple[Snapshots, Manager]:
    controller = _our_process(bed, scenario, workdir)
    async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
        await install_crds(kube)
        await _install_integration_crds(kube, scenario)
        pod_namespaces = await _pod_namespaces(kube, scenario)
        await _watch_caches_ready(kube)
        lws = await _start_upstream(kube, bed, scenario, workdir)
        manager = _WithLws(controller, lws)
        controller.start()
        try:
            await controller.wait_ready_async()
            assert controller.webhook_port is not None
            ca = bed.pki.ca_cert.read_bytes()
            hooks = our_webhooks(controller.webhook_port, ca, _webhook_groups(scenario), pod_namespaces)
            await apply_objects(kube, hooks)
            await conversion_on_loopback(kube, CONVERSION_CRDS, controller.webhook_port, ca)
            if controller.visibility_port is not None:
                await register_visibility(kube, controller.visibility_port)
            await _webhooks_called(kube, pod_namespaces, scenario)
            return await _steps(kube, scenario), manager
        except BaseException as err:
            tail = manager.log_tail()
            manager.stop()
            raise RuntimeError(f"{err}\ncontroller log tail:\n{tail}") from err


def run(scenario: Scenario, implementation: Implementation, run_dir: Path) -> Snapshots:
    """Runs the scenario on a fresh test-bed in run_dir; returns its snapshots by checkpoint."""
    spec = load_spec(scenario.testbed) if scenario.testbed is not None else None
    bed = Testbed(run_dir=run_dir, spec=spec, echo=None)
    bed.start()
    manager: Manager | None = None
    try:
        runner = _with_kueue if implementation == "kueue" else _with_ours
        snapshots, manager = asyncio.run(runner(bed, scenario, run_dir / "logs"))
        return snapshots
    finally:
        if manager is not None:
            manager.stop()
        bed.stop(grace=0.0)  # thrown away: its snapshots are taken and its logs written
