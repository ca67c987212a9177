"""Kueue's visibility API served by the controller, through the test-bed's real kube-apiserver.

The APIServices (v1beta2, v1beta1) are registered as manifests/visibility.yaml registers them, but
pointing at a Service of type ExternalName ``localhost`` with the controller's visibility port (the
test-bed has no pod network). The API server runs with the aggregation layer configured as in a
real cluster (its front-proxy CA and client certificate, e2e/testbed/components.py), so every
request reaches the controller through the front proxy: the controller authenticates the proxy's
certificate against the request-header CA it reads from extension-apiserver-authentication and
authorizes the user the proxy names with a SubjectAccessReview.

Checked: discovery through the API server (aggregated discovery fresh); the pending workloads of
a ClusterQueue and of its LocalQueues through the API server (both versions, read with ``kubectl
get --raw`` and a client) and through Kueue's own kueuectl v0.18.1 (its Position in Queue column),
with positions that are the order in which the scheduler then admits them (each let in alone as
the one before it finishes); ``kueuectl list clusterqueue`` and
``list localqueue``; ``kueuectl stop workload`` / ``resume workload`` taking a workload out of the
list and back; requests without the front proxy's certificate (401), with a client certificate of
another CA (refused in the TLS handshake), and by users without the permission (403 from the
controller's SubjectAccessReview, and from the API server for the shipped roles) are refused.
Beyond Kueue: Jobs of a known run time get an estimated start (draQuotaEstimatedStart) that
kueuectl reads past, and start within the bound docs/visibility.md states.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import ssl
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from e2e.support.aggregation import VERSIONS, bind_user
from e2e.support.aggregation import register_visibility as _register
from e2e.support.aggregation import unregister_visibility as _unregister
from e2e.support.deploy import ROOT, ControllerProcess, free_port, install_crds
from e2e.support.workloads import KUEUE, reserved
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.kubeclient import ApiError
from e2e.testbed.paths import cache_dir, read_versions
from e2e.testbed.scenario import wait_for
from reconciler.api.times import epoch

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]
GROUP = "visibility.kueue.x-k8s.io"


def _kueuectl() -> Path:
    versions = dict(
        line.split("=", 1)
        for line in (ROOT / "e2e" / "versions.env").read_text().splitlines()
        if "=" in line and not line.lstrip().startswith("#")
    )
    binary = cache_dir() / f"kueuectl-{versions['KUEUE_VERSION'].strip()}" / "bin" / "kueuectl"
    if not binary.exists():
        raise FileNotFoundError(f"kueuectl is not built ({binary}): run e2e/setup.sh --kueuectl")
    return binary


def _kubectl() -> Path:
    """kubectl of the control plane's version (built with it by e2e/build-binaries.sh --kueuectl)."""
    binary = cache_dir() / f"kubernetes-{read_versions().kubernetes}" / "bin" / "kubectl"
    if not binary.exists():
        raise FileNotFoundError(f"kubectl is not built ({binary}): run e2e/setup.sh --kueuectl")
    return binary


async def _kubectl_raw(testbed: Testbed, path: str) -> Obj:
    argv = [str(_kubectl()), "--kubeconfig", str(testbed.kubeconfig), "get", "--raw", path]
    done = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"kubectl get --raw {path}: {done.stderr}"
    answer: Obj = json.loads(done.stdout)
    return answer


@pytest.fixture(scope="module")
def visible(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    """The controller with its visibility API on a loopback port, registered with the API server
    (unregistered at the end: an unavailable APIService would stall namespace deletion)."""
    assert _kueuectl().exists()
    assert _kubectl().exists()

    async def install() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(install())
    log = tmp_path_factory.mktemp("visibility") / "controller.log"
    process = ControllerProcess(
        ROOT / "examples/walkthrough/00-configuration.yaml",
        testbed.kubeconfig,
        log,
        visibility_port=free_port(),
    )
    process.start()
    process.wait_ready()

    async def register() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            assert process.visibility_port is not None
            await _register(kube, process.visibility_port)

    async def unregister() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await _unregister(kube)

    try:
        asyncio.run(register())
        yield process
    finally:
        asyncio.run(unregister())
        code = process.stop()
        assert code == 0, f"the controller did not stop cleanly (exit {code}):\n{process.log_tail(30)}"


# --- the queue and its workloads -------------------------------------------------------------------


async def _make_queues(kube: KubeClient, namespace: str) -> str:
    """A ClusterQueue with room for one 1-CPU workload at a time, LocalQueues `a` and `b`."""
    cq = f"vis-{namespace}"
    await kube.create(
        api_path(KUEUE, "resourceflavors"),
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": cq}, "spec": {}},
    )
    quota = {"name": cq, "resources": [{"name": "cpu", "nominalQuota": "1"}]}
    await kube.create(
        api_path(KUEUE, "clusterqueues"),
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [quota]}],
            },
        },
    )
    for lq in ("a", "b"):
        await kube.create(
            api_path(KUEUE, "localqueues", namespace),
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": lq, "namespace": namespace},
                "spec": {"clusterQueue": cq},
            },
        )
    return cq


async def _drop_queues(kube: KubeClient, cq: str) -> None:
    for path in (api_path(KUEUE, "clusterqueues", name=cq), api_path(KUEUE, "resourceflavors", name=cq)):
        try:
            await kube.delete(path)
        except ApiError as err:
            if err.status != 404:
                raise


async def _workload(kube: KubeClient, namespace: str, name: str, queue: str, priority: int) -> None:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
    await kube.create(
        api_path(KUEUE, "workloads", namespace),
        {
            "apiVersion": KUEUE,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "queueName": queue,
                "priority": priority,
                "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
            },
        },
    )


async def _reserved(kube: KubeClient, namespace: str) -> set[str]:
    items, _ = await kube.list_all(api_path(KUEUE, "workloads", namespace))
    return {w["metadata"]["name"] for w in items if reserved(w)}


def _pending_path(version: str, cq: str | None = None, namespace: str = "", lq: str = "") -> str:
    if cq is not None:
        return f"/apis/{GROUP}/{version}/clusterqueues/{cq}/pendingworkloads"
    return f"/apis/{GROUP}/{version}/namespaces/{namespace}/localqueues/{lq}/pendingworkloads"


def _rows(items: list[Obj]) -> list[tuple[str, str, int, int, int]]:
    return [
        (
            i["metadata"]["name"],
            i["localQueueName"],
            i["priority"],
            i["positionInClusterQueue"],
            i["positionInLocalQueue"],
        )
        for i in items
    ]


async def _kueuectl_run(testbed: Testbed, *args: str) -> str:
    argv = [str(_kueuectl()), *args, "--kubeconfig", str(testbed.kubeconfig)]
    done = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
    return done.stdout


def _table(text: str) -> list[dict[str, str]]:
    """A kubectl-style table (left-aligned columns, empty cells allowed) by its header's columns."""
    lines = [line for line in text.splitlines() if line.strip()]
    starts = [m.start() for m in re.finditer(r"(?:^|(?<=\s\s))\S", lines[0])]
    names = [lines[0][a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
    return [
        {n: line[a:b].strip() for n, a, b in zip(names, starts, [*starts[1:], None], strict=True)}
        for line in lines[1:]
    ]


@pytest_asyncio.fixture
async def queue(visible: ControllerProcess, kube: KubeClient, namespace: str) -> AsyncIterator[str]:
    cq = await _make_queues(kube, namespace)
    try:
        yield cq
    finally:
        await _drop_queues(kube, cq)


# --- tests ---------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_discovery_through_the_api_server(visible: ControllerProcess, kube: KubeClient) -> None:
    group = await kube.get(f"/apis/{GROUP}")
    assert [v["version"] for v in group["versions"]] == list(VERSIONS)
    for version in VERSIONS:
        resources = await kube.get(f"/apis/{GROUP}/{version}")
        verbs = {r["name"]: r["verbs"] for r in resources["resources"]}
        assert verbs["clusterqueues/pendingworkloads"] == ["get"]
        assert verbs["localqueues/pendingworkloads"] == ["get"]
    # The API server's aggregated discovery (what controllers such as the namespace deleter read)
    # holds both versions fresh: a stale one would stall every namespace's deletion.
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    async with kube.session.get(kube.server + "/apis", headers={"Accept": accept}) as resp:
        assert resp.status == 200
        merged = json.loads(await resp.text())
    ours = next(g for g in merged["items"] if g["metadata"]["name"] == GROUP)
    freshness = {v["version"]: v.get("freshness", "Current") for v in ours["versions"]}
    assert freshness == dict.fromkeys(VERSIONS, "Current")
    resources = {r["resource"]: r for r in ours["versions"][0]["resources"]}
    assert resources["localqueues"]["subresources"][0]["subresource"] == "pendingworkloads"


@pytest.mark.asyncio
async def test_positions_are_the_admission_order(
    visible: ControllerProcess, kube: KubeClient, namespace: str, queue: str, testbed: Testbed
) -> None:
    await _workload(kube, namespace, "running", "a", 0)
    await wait_for("the first workload admitted", lambda: _has(kube, namespace, "running"), within=30)
    # Priorities first, then creation time (a second apart: the timestamps' resolution).
    for name, lq, priority in (("low", "a", 1), ("mid-1", "a", 5), ("high", "b", 10), ("mid-2", "a", 5)):
        await _workload(kube, namespace, name, lq, priority)
        await asyncio.sleep(1.1)
    expected = [
        ("high", "b", 10, 0, 0),
        ("mid-1", "a", 5, 1, 0),
        ("mid-2", "a", 5, 2, 1),
        ("low", "a", 1, 3, 2),
    ]

    async def listed() -> list[Obj] | None:
        summary = await kube.get(_pending_path("v1beta2", queue))
        items: list[Obj] = summary["items"]
        return items if len(items) == 4 else None

    items = await wait_for("four pending workloads", listed, within=30)
    assert _rows(items) == expected
    assert items[0]["metadata"]["namespace"] == namespace
    assert items[0]["metadata"]["creationTimestamp"]
    # Beyond Kueue: why each waits, the words of its QuotaReserved condition (none on a workload
    # the scheduler has not told yet: one of a group found not to fit waits untold, as in Kueue).
    await wait_for("pendingReason to match the conditions", lambda: _reasons_match(kube, queue), within=30)
    by_kubectl = await _kubectl_raw(testbed, _pending_path("v1beta2", queue))
    assert _rows(by_kubectl["items"]) == expected
    v1beta1 = await _kubectl_raw(testbed, _pending_path("v1beta1", queue))
    assert v1beta1["apiVersion"] == f"{GROUP}/v1beta1"
    assert _rows(v1beta1["items"]) == expected
    local_a = await kube.get(_pending_path("v1beta2", namespace=namespace, lq="a"))
    assert _rows(local_a["items"]) == [r for r in expected if r[1] == "a"]
    page = await _kubectl_raw(testbed, _pending_path("v1beta2", queue) + "?offset=1&limit=2")
    assert _rows(page["items"]) == expected[1:3]

    table = _table(await _kueuectl_run(testbed, "list", "workload", "-n", namespace))
    positions = {row["NAME"]: row["POSITION IN QUEUE"] for row in table}
    # kueuectl shows the position in the workload's LocalQueue; none for the admitted one.
    assert positions == {"running": "", "high": "0", "mid-1": "0", "mid-2": "1", "low": "2"}, table

    # Let them in one at a time: each admitted one is the head of the list read just before.
    admitted = "running"
    for row in expected:
        head = _rows((await kube.get(_pending_path("v1beta2", queue)))["items"])[0]
        assert head[0] == row[0]
        await kube.delete(api_path(KUEUE, "workloads", namespace, name=admitted))
        admitted = row[0]
        await wait_for(f"{admitted} admitted", partial(_has, kube, namespace, admitted), within=30)
        later = {r[0] for r in expected[expected.index(row) + 1 :]}
        assert not await _reserved(kube, namespace) & later
    assert (await kube.get(_pending_path("v1beta2", queue)))["items"] == []


async def _reasons_match(kube: KubeClient, queue: str) -> bool:
    items = (await kube.get(_pending_path("v1beta2", queue)))["items"]
    for item in items:
        meta = item["metadata"]
        workload = await kube.get(api_path(KUEUE, "workloads", meta["namespace"], name=meta["name"]))
        conditions = workload.get("status", {}).get("conditions") or []
        told = next((c for c in conditions if c["type"] == "QuotaReserved" and c["status"] == "False"), None)
        if item.get("pendingReason") != (told["message"] if told else None):
            return False
    return bool(items) and "pendingReason" in items[0]


async def _has(kube: KubeClient, namespace: str, name: str) -> bool:
    return name in await _reserved(kube, namespace)


@pytest.mark.asyncio
async def test_kueuectl_lists_queues_and_stops_and_resumes_a_workload(
    visible: ControllerProcess, kube: KubeClient, namespace: str, queue: str, testbed: Testbed
) -> None:
    await _workload(kube, namespace, "running", "a", 0)
    await wait_for("the first workload admitted", lambda: _has(kube, namespace, "running"), within=30)
    await _workload(kube, namespace, "waiting", "b", 0)

    async def pending_names() -> list[str]:
        return [i["metadata"]["name"] for i in (await kube.get(_pending_path("v1beta2", queue)))["items"]]

    await wait_for("waiting listed", lambda: _truthy(pending_names, ["waiting"]), within=30)

    async def cq_row() -> dict[str, str] | None:
        rows = _table(await _kueuectl_run(testbed, "list", "clusterqueue"))
        row = next((r for r in rows if r["NAME"] == queue), None)
        return row if row is not None and row.get("PENDING WORKLOADS") == "1" else None

    row = await wait_for("kueuectl list clusterqueue to show one pending", cq_row, within=30)
    assert row["ADMITTED WORKLOADS"] == "1"
    rows = _table(await _kueuectl_run(testbed, "list", "localqueue", "-n", namespace))
    by_name = {r["NAME"]: r for r in rows}
    assert by_name["b"]["PENDING WORKLOADS"] == "1"
    assert by_name["a"]["ADMITTED WORKLOADS"] == "1"

    await _kueuectl_run(testbed, "stop", "workload", "waiting", "-n", namespace)
    stopped = await kube.get(api_path(KUEUE, "workloads", namespace, name="waiting"))
    assert stopped["spec"]["active"] is False
    await wait_for("a stopped workload to leave the list", lambda: _truthy(pending_names, []), within=30)
    await _kueuectl_run(testbed, "resume", "workload", "waiting", "-n", namespace)
    await wait_for("a resumed workload to come back", lambda: _truthy(pending_names, ["waiting"]), within=30)


async def _truthy(read: Any, want: list[str]) -> bool:
    return bool(await read() == want)


def _client_context(cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the serving certificate is self-signed, as shipped
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context


async def _direct(
    port: int, path: str, context: ssl.SSLContext, headers: dict[str, str] | None = None
) -> tuple[int, Obj]:
    url = f"https://127.0.0.1:{port}{path}"
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, ssl=context, headers=headers or {}) as resp,
    ):
        return resp.status, json.loads(await resp.text())


@pytest.mark.asyncio
async def test_requests_without_the_front_proxy_or_the_permission_are_refused(
    visible: ControllerProcess, kube: KubeClient, namespace: str, queue: str, testbed: Testbed
) -> None:
    port = visible.visibility_port
    assert port is not None
    path = _pending_path("v1beta2", queue)
    pki = testbed.pki
    # No client certificate: whoever the headers claim to be, not authenticated.
    status, body = await _direct(port, path, _client_context(), {"X-Remote-User": "testbed-admin"})
    assert (status, body["reason"]) == (401, "Unauthorized")
    # A client certificate of another CA (the cluster's, not the front proxy's): refused in the handshake.
    with pytest.raises(aiohttp.ClientError):
        await _direct(port, path, _client_context(pki.admin_cert, pki.admin_key), {"X-Remote-User": "x"})
    # The front proxy's certificate, but without a user.
    proxy = _client_context(pki.front_proxy_client_cert, pki.front_proxy_client_key)
    status, body = await _direct(port, path, proxy)
    assert status == 401
    # The front proxy naming a user who may not read pending workloads: the SubjectAccessReview says no.
    user = f"nobody-{uuid.uuid4().hex[:6]}"
    status, body = await _direct(
        port, path, proxy, {"X-Remote-User": user, "X-Remote-Group": "system:authenticated"}
    )
    assert (status, body["reason"]) == (403, "Forbidden"), body
    assert user in body["message"]
    # ... and one who may (system:masters): the answer.
    status, body = await _direct(
        port, path, proxy, {"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
    )
    assert status == 200
    assert body["kind"] == "PendingWorkloadsSummary"
    # Through the API server: a user bound to the shipped LocalQueue viewer role in this namespace
    # reads its LocalQueue's list but not the ClusterQueue's.
    await bind_user(kube, namespace, "kueue-pending-workloads-lq-viewer-role", user)

    async def as_user(p: str) -> int:
        async with kube.session.get(kube.server + p, headers={"Impersonate-User": user}) as resp:
            return resp.status

    async def lq_readable() -> bool:
        return await as_user(_pending_path("v1beta2", namespace=namespace, lq="a")) == 200

    await wait_for("the LocalQueue viewer to read its LocalQueue", lq_readable, within=30)
    assert await as_user(path) == 403


# --- beyond Kueue: the estimated start -----------------------------------------------------------

RUN_SECONDS = 5


def _sleep_job(namespace: str, name: str) -> Obj:
    """A 1-CPU Job whose pod runs RUN_SECONDS on the test-bed's node simulator."""
    container = {
        "name": "c",
        "image": "busybox",
        "command": ["true"],
        "resources": {"requests": {"cpu": "1"}},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": {"kueue.x-k8s.io/queue-name": "a"}},
        "spec": {
            "suspend": True,
            "template": {
                "metadata": {"annotations": {"testbed.dra-quota.dev/run-seconds": str(RUN_SECONDS)}},
                "spec": {"restartPolicy": "Never", "containers": [container]},
            },
        },
    }


async def _by_job(kube: KubeClient, namespace: str) -> dict[str, Obj]:
    items, _ = await kube.list_all(api_path(KUEUE, "workloads", namespace))
    return {
        w["metadata"]["ownerReferences"][0]["name"]: w for w in items if w["metadata"].get("ownerReferences")
    }


def _since(workload: Obj, kind: str) -> float | None:
    found = next((c for c in workload.get("status", {}).get("conditions") or [] if c["type"] == kind), None)
    if found is None or found["status"] != "True":
        return None
    return epoch(found["lastTransitionTime"])


async def _all_true(kube: KubeClient, namespace: str, jobs: list[str], kind: str) -> dict[str, Obj] | None:
    workloads = await _by_job(kube, namespace)
    return workloads if all(j in workloads and _since(workloads[j], kind) for j in jobs) else None


@pytest.mark.asyncio
async def test_estimated_starts_are_within_the_stated_bound(
    visible: ControllerProcess, kube: KubeClient, namespace: str, queue: str, testbed: Testbed
) -> None:
    """Jobs of a known run time, one at a time on one CPU: once one has finished (the observed
    median), the pending ones carry draQuotaEstimatedStart through the API server, kueuectl still
    reads the list, and each starts within (k + 1) * d of its estimate (docs/visibility.md), d the
    largest gap between what a workload ahead really held the CPU for and the median."""
    jobs = api_path("batch/v1", "jobs", namespace)
    await kube.create(jobs, _sleep_job(namespace, "warm"))
    done = await wait_for(
        "warm finished", lambda: _all_true(kube, namespace, ["warm"], "Finished"), within=90
    )
    warm = done["warm"]
    median = (_since(warm, "Finished") or 0.0) - (_since(warm, "Admitted") or 0.0)
    await kube.create(jobs, _sleep_job(namespace, "r"))
    await wait_for("r admitted", lambda: _all_true(kube, namespace, ["r"], "Admitted"), within=30)
    for name in ("p1", "p2"):
        await kube.create(jobs, _sleep_job(namespace, name))
        await asyncio.sleep(1.1)  # creation times a second apart: p1 ahead of p2

    async def estimated() -> list[Obj] | None:
        items: list[Obj] = (await _kubectl_raw(testbed, _pending_path("v1beta2", queue)))["items"]
        return items if len(items) == 2 and all("draQuotaEstimatedStart" in i for i in items) else None

    items = await wait_for("two pending workloads with estimates", estimated, within=30)
    owners = [i["metadata"]["ownerReferences"][0]["name"] for i in items]
    assert owners == ["p1", "p2"]
    estimates = [epoch(i["draQuotaEstimatedStart"]) or 0.0 for i in items]
    table = _table(await _kueuectl_run(testbed, "list", "workload", "-n", namespace))
    assert sorted(row["POSITION IN QUEUE"] for row in table if row["POSITION IN QUEUE"]) == ["0", "1"], table

    admitted = await wait_for(
        "p1 and p2 admitted", lambda: _all_true(kube, namespace, ["r", "p1", "p2"], "Admitted"), within=90
    )
    starts = [_since(admitted[j], "Admitted") or 0.0 for j in ("r", "p1", "p2")]
    held = [b - a for a, b in itertools.pairwise(starts)]  # r's and p1's time on the CPU
    d = max(abs(h - median) for h in held)
    report = f"median {median}, estimates {estimates}, starts {starts[1:]}, held {held}, d {d}"
    for k, (estimate, start) in enumerate(zip(estimates, starts[1:], strict=True)):
        # (k + 1) * d, and a second for the times' resolution.
        assert abs(start - estimate) <= (k + 1) * d + 1, report
    # The estimate is of use: off by seconds when runs are known (the controller's reaction included).
    assert d <= 5, report
    print(report)
