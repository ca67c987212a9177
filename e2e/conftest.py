"""Fixtures for every test under e2e/: the test-bed's own tests (e2e/testbed/tests) and the
controller's (e2e/test_*.py).

``testbed`` (session scope) yields a started :class:`e2e.testbed.Testbed`:
etcd, kube-apiserver, kube-controller-manager, kube-scheduler, the agents
process (node simulator + fake DRA driver) and the driver's kubelet plugin
(``driver-gpu-node-1``) with the default spec (node ``gpu-node-1`` with one
Tesla T4). ``testbed.kubeconfig`` is the admin kubeconfig. It is stopped at the
end of the session.

``cluster`` is the cluster a test talks to. With ``E2E_TARGET=kind`` (set by
``e2e/kind/run.sh``) it is the existing cluster of ``$E2E_KUBECONFIG`` and no
test-bed is started; otherwise it is the session test-bed. ``kube`` and
``namespace`` use ``cluster``. A ``@pytest.mark.kind`` test fails (never
skips) when ``E2E_TARGET=kind`` and ``E2E_KUBECONFIG`` are not both set.

``controller`` (module scope) is ``reconciler run`` with the walkthrough's
configuration on the session test-bed, the CRDs installed.

Before the first test-bed test runs, the control-plane binaries are built if
the cache lacks them (outside any test timeout).
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from e2e.support.deploy import ROOT, ControllerProcess, install_crds
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.binaries import ensure_binaries
from e2e.testbed.clusters import KIND_TARGET, Cluster, kind_cluster_from_env
from e2e.testbed.kubeclient import ApiError
from e2e.testbed.paths import binary_paths
from e2e.testbed.runcontrol import reap_orphaned
from e2e.testbed.scenario import wait_for


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    # Test-beds left running by an earlier, killed pytest run (owner gone).
    earlier_runs = tmp_path_factory.getbasetemp().parent.glob("*/testbed*")
    for run_dir in reap_orphaned(earlier_runs):
        print(f"[testbed] stopped an orphaned test-bed in {run_dir}")
    with Testbed(run_dir=tmp_path_factory.mktemp("testbed")) as bed:
        yield bed


@pytest.fixture
def cluster(request: pytest.FixtureRequest) -> Cluster:
    """kind (E2E_TARGET=kind, E2E_KUBECONFIG) or the session test-bed (started on first use).

    A test marked ``kind`` never falls back to the test-bed."""
    wants_kind = request.node.get_closest_marker("kind") is not None
    if wants_kind or os.environ.get("E2E_TARGET") == KIND_TARGET:
        return kind_cluster_from_env()
    bed: Testbed = request.getfixturevalue("testbed")
    return Cluster(kubeconfig=bed.kubeconfig, target="testbed", testbed=bed)


@pytest_asyncio.fixture
async def kube(cluster: Cluster) -> AsyncIterator[KubeClient]:
    """An admin API client for the cluster (one per test, on the test's loop)."""
    async with KubeClient.from_kubeconfig(cluster.kubeconfig) as client:
        yield client


@pytest_asyncio.fixture
async def namespace(kube: KubeClient) -> AsyncIterator[str]:
    """A fresh namespace; deleted after the test, waiting until it is gone so the
    next test finds the GPUs free."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    await kube.create(
        api_path("v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    path = api_path("v1", "namespaces", name=name)
    try:
        await kube.delete(path)
    except ApiError as err:
        if err.status != 404:
            raise
    await wait_for(f"namespace {name} to be deleted", lambda: _gone(kube, path), within=90, interval=0.5)


async def _gone(kube: KubeClient, path: str) -> bool:
    return await kube.get_or_none(path) is None


@pytest.fixture(scope="module")
def controller(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    """`reconciler run` with the walkthrough's configuration on the session test-bed, CRDs installed.

    One per test module; stopped with SIGTERM at the end, which must exit cleanly."""

    async def install() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(install())
    log = tmp_path_factory.mktemp("controller") / "controller.log"
    process = ControllerProcess(ROOT / "examples/walkthrough/00-configuration.yaml", testbed.kubeconfig, log)
    process.start()
    # Ready before the first test creates anything: a Job created earlier may finish on the
    # node simulator before the controller's first list sees it (it then never suspends it).
    process.wait_ready()
    yield process
    code = process.stop()
    assert code == 0, f"the controller did not stop cleanly on SIGTERM (exit {code}):\n{process.log_tail(30)}"


# The longest files (their lines in the test command's phase table), started first so that
# parallel workers finish together rather than one of them starting conformance last.
LONGEST_FIRST = (
    "e2e/test_conformance.py",
    "e2e/test_conformance_second.py",
    "e2e/test_controller_faults.py",
    "e2e/test_real_kubelet.py",
    "e2e/test_controller_ha.py",
    "e2e/test_controller_webhooks.py",
    "e2e/test_device_inventory.py",
    "e2e/test_controller_pods_ready.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files of LONGEST_FIRST first, in that order; the rest as collected (a stable sort:
    every worker of a parallel run computes the same order, as pytest-xdist requires)."""

    def rank(item: pytest.Item) -> int:
        path = (
            item.path.relative_to(config.rootpath).as_posix()
            if item.path.is_relative_to(config.rootpath)
            else ""
        )
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build the control-plane binaries before any test runs (outside test timeouts).

    Only when a selected test uses the test-bed or the binaries (helm, kustomize); the
    build is a no-op when the cache already holds them.
    """
    if not any(item.get_closest_marker(m) for item in session.items for m in ("testbed", "binaries")):
        return
    if not binary_paths().missing():
        return
    capture = session.config.pluginmanager.getplugin("capturemanager")
    print("\n[testbed] building etcd and Kubernetes binaries (first run only)", flush=True)
    if capture is not None:
        with capture.global_and_fixture_disabled():
            ensure_binaries()
    else:
        ensure_binaries()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test's report carries the tail of each process log its fixtures hold (the
    controller's, an upstream manager's): CI keeps no test-bed, so this is what is left to read."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.when != "call" or not report.failed:
        return
    for name, value in getattr(item, "funcargs", {}).items():
        tail = getattr(value, "log_tail", None)
        if callable(tail) and hasattr(value, "log_path"):
            alive = getattr(value, "alive", None)
            state = "" if not callable(alive) else (", running" if alive() else ", NOT RUNNING")
            report.sections.append((f"log of fixture {name!r}{state} (last 80 lines)", str(tail(80))))
