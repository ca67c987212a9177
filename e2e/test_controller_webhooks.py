"""Kueue's admission webhooks on a test-bed of this module's own, called by the real kube-apiserver
on loopback.

The shipped configurations (manifests/webhook.yaml: failurePolicy Fail, Kueue's namespace
exclusions) are registered with ``clientConfig.url: https://127.0.0.1:<port>/...`` and the CA of
a certificate made here and mounted the way cert-manager would (``internalCertManagement.enable:
false``), for a controller that leads. Checked: a queue-labelled Job created unsuspended is stored
suspended and gets no pod before its Workload is admitted; a namespace's LocalQueue ``default`` is
set on Jobs naming none; malformed ClusterQueues, Workloads and ResourceFlavors are refused with
the field named, and so are a badly named flavor topology and a pod template's slice annotation
(a TAS flavor and a Job's placement annotation pass; Topology objects are stored);
a new certificate is served without a restart; with the webhook down such a Job is
refused instead of running outside quota, except in kube-system. Then internalCertManagement on a
second replica (a follower: webhooks answer on every replica): it creates the Secret, injects the
CA bundle into configurations made here, and the API server trusts the certificate it serves.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import re
import socket
import ssl
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml
from cryptography import x509

from e2e.support.deploy import ROOT, ControllerProcess, free_port, install_crds
from e2e.support.queues import drop_queues, make_queues
from e2e.support.webhooks import (
    QUEUE_LABEL,
    loopback_certificate,
    on_loopback,
    queue_job,
    register,
    scoped,
    shipped_configurations,
    unregister,
    wait_until_jobs_are_suspended,
)
from e2e.support.workloads import KUEUE, is_true
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.kubeclient import ApiError
from e2e.testbed.scenario import job_pods, wait_for
from reconciler.integrations.batchjob import job_workload_name
from reconciler.webhook.certmanager import write_cert_dir
from reconciler.webhook.certs import new_bundle

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(300)]

Obj = dict[str, Any]
ELECTION = [
    "--leader-elect",
    "--leader-election-namespace",
    "default",
    "--leader-election-id",
    "webhooks-e2e",
]


def _configuration(path: Path, **fields: Any) -> Path:
    config = yaml.safe_load((ROOT / "examples/walkthrough/00-configuration.yaml").read_text())
    config.update(fields)
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """This module's own test-bed: its webhooks fail closed, which no other test should meet."""
    with Testbed(run_dir=tmp_path_factory.mktemp("testbed-webhooks")) as bed:
        yield bed


class Served:
    """The leading controller, its webhook port, certificate directory and CA."""

    def __init__(self, process: ControllerProcess, cert_dir: Path, ca_pem: bytes) -> None:
        self.process, self.cert_dir, self.ca_pem = process, cert_dir, ca_pem

    @property
    def port(self) -> int:
        assert self.process.webhook_port is not None
        return self.process.webhook_port


@pytest.fixture(scope="module")
def served(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    work = tmp_path_factory.mktemp("webhooks")
    cert_dir = work / "certs"
    bundle = loopback_certificate(cert_dir)
    config = _configuration(work / "config.yaml", internalCertManagement={"enable": False})
    port = free_port()
    process = ControllerProcess(
        config,
        testbed.kubeconfig,
        work / "controller.log",
        *ELECTION,
        "--webhook-cert-dir",
        str(cert_dir),
        webhook_port=port,
    )
    configurations = on_loopback(shipped_configurations(), port, bundle.ca.cert_pem)

    async def setup() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_crds(kube)
            await register(kube, configurations)

    async def teardown() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await unregister(kube, configurations)

    asyncio.run(setup())
    process.start()
    try:
        yield Served(process, cert_dir, bundle.ca.cert_pem)
    finally:
        code = process.stop()
        asyncio.run(teardown())
    assert code == 0, process.log_tail(30)


async def _ready(kube: KubeClient, namespace: str) -> None:
    await wait_until_jobs_are_suspended(kube, namespace)


@pytest.mark.asyncio
async def test_a_queue_labelled_job_is_stored_suspended_and_gets_no_pod_before_admission(
    served: Served, kube: KubeClient, namespace: str
) -> None:
    await _ready(kube, namespace)
    jobs = api_path("batch/v1", "jobs", namespace)
    # No LocalQueue yet, so nothing can admit it: whatever runs now runs outside quota.
    created = await kube.create(jobs, queue_job("eager", namespace, suspend=False))
    assert created["spec"]["suspend"] is True  # the API's answer to the create itself
    workload = api_path(KUEUE, "workloads", namespace, job_workload_name("eager", created["metadata"]["uid"]))
    await wait_for("the pending Workload", lambda: kube.get_or_none(workload))
    for _ in range(10):
        assert await job_pods(kube, namespace, "eager") == []
        assert (await kube.get(f"{jobs}/eager"))["spec"]["suspend"] is True
        await asyncio.sleep(0.5)
    cq = await make_queues(kube, namespace)
    try:

        async def admitted() -> Obj | None:
            wl = await kube.get(workload)
            return wl if is_true(wl, "Admitted") else None

        wl = await wait_for("the Workload to be admitted", admitted, within=60)
        pods = await wait_for("the Job's pod", lambda: job_pods(kube, namespace, "eager"), within=60)
        admitted_at = next(c for c in wl["status"]["conditions"] if c["type"] == "Admitted")[
            "lastTransitionTime"
        ]
        assert all(p["metadata"]["creationTimestamp"] >= admitted_at for p in pods)
        # A Job naming no queue is left alone (no LocalQueue named default here).
        plain = await kube.create(jobs, queue_job("plain", namespace, queue=None))
        assert plain["spec"]["suspend"] is False
        assert QUEUE_LABEL not in plain["metadata"]["labels"]
    finally:
        await kube.delete(f"{jobs}/eager", params={"propagationPolicy": "Background"})
        await wait_for("the Workload to go", lambda: _gone(kube, workload), within=60)
        await drop_queues(kube, namespace)
        assert cq


async def _gone(kube: KubeClient, path: str) -> bool:
    return await kube.get_or_none(path) is None


@pytest.mark.asyncio
async def test_a_cluster_queue_in_use_is_kept_until_its_workloads_are_gone(
    served: Served, kube: KubeClient, namespace: str
) -> None:
    """Kueue's in-use finalizers: set by the mutating webhooks, released by the controller."""
    await _ready(kube, namespace)
    cq_name = await make_queues(kube, namespace)
    cq_path = api_path(KUEUE, "clusterqueues", name=cq_name)
    flavor_path = api_path(KUEUE, "resourceflavors", name=f"t4-{namespace}")
    for path in (cq_path, flavor_path):
        assert (await kube.get(path))["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    jobs = api_path("batch/v1", "jobs", namespace)
    job = await kube.create(jobs, queue_job("holder", namespace, run_seconds="forever"))
    workload = api_path(KUEUE, "workloads", namespace, job_workload_name("holder", job["metadata"]["uid"]))

    async def admitted() -> bool:
        return is_true(await kube.get(workload), "Admitted")

    await wait_for("the Workload to be admitted", admitted, within=60)
    await kube.delete(cq_path)
    await kube.delete(flavor_path)

    async def terminating() -> Obj | None:
        cq = await kube.get(cq_path)
        active: Obj = next(
            (c for c in cq.get("status", {}).get("conditions", []) if c["type"] == "Active"), {}
        )
        return cq if active.get("reason") == "Terminating" else None

    cq = await wait_for("the ClusterQueue to say it is terminating", terminating, within=30)
    assert cq["metadata"]["deletionTimestamp"]
    assert next(c for c in cq["status"]["conditions"] if c["type"] == "Active")["message"] == (
        "Can't admit new workloads; clusterQueue is terminating"
    )
    await asyncio.sleep(2)
    assert await kube.get_or_none(cq_path) is not None  # quota is still held in it
    assert await kube.get_or_none(flavor_path) is not None  # the ClusterQueue still lists it
    await kube.delete(f"{jobs}/holder", params={"propagationPolicy": "Background"})
    await wait_for("the Workload to go", lambda: _gone(kube, workload), within=60)
    await wait_for("the ClusterQueue to go", lambda: _gone(kube, cq_path), within=30)
    await wait_for("the flavor to go", lambda: _gone(kube, flavor_path), within=30)


@pytest.mark.asyncio
async def test_the_default_local_queue_is_set_on_jobs_naming_none(
    served: Served, kube: KubeClient, namespace: str
) -> None:
    await _ready(kube, namespace)
    local_queue = {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": namespace},
        "spec": {"clusterQueue": "nowhere"},
    }
    await kube.create(api_path(KUEUE, "localqueues", namespace), local_queue)
    jobs = api_path("batch/v1", "jobs", namespace)

    async def defaulted() -> Obj | None:
        job = queue_job("unnamed", namespace, queue=None)
        created = await kube.request("POST", jobs, params={"dryRun": "All"}, body=job)
        return created if created["metadata"].get("labels", {}).get(QUEUE_LABEL) == "default" else None

    created = await wait_for("a Job naming no queue to get queue default", defaulted, within=15)
    assert created["spec"]["suspend"] is True


def _bad_cluster_queue(name: str, label: dict[str, str] | None = None) -> Obj:
    return {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": label or {}},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [
                        {"name": "t4", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "-1"}]}
                    ],
                }
            ]
        },
    }


async def _refused(kube: KubeClient, path: str, body: Obj) -> ApiError:
    with pytest.raises(ApiError) as refused:
        await kube.create(path, body)
    return refused.value


@pytest.mark.asyncio
async def test_malformed_objects_are_refused_with_the_field_named(
    served: Served, kube: KubeClient, namespace: str
) -> None:
    await _ready(kube, namespace)
    error = await _refused(kube, api_path(KUEUE, "clusterqueues"), _bad_cluster_queue(f"neg-{namespace}"))
    assert error.status == 403
    assert (
        'admission webhook "vclusterqueue.kb.io" denied the request: '
        'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Invalid value: "-1": '
        "must be greater than or equal to 0"
    ) in str(error)
    pod_set: Obj = {"name": "main", "count": 1, "template": {"spec": {}}}
    workload = {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": "malformed", "namespace": namespace},
        "spec": {"queueName": "lq", "podSets": [pod_set]},
    }
    error = await _refused(kube, api_path(KUEUE, "workloads", namespace), workload)
    assert 'admission webhook "vworkload.kb.io" denied the request' in str(error)
    assert "spec.podSets[0].template.spec.containers: Required value" in str(error)
    # A pod set's name is refused by the CRD's pattern (422), as Kueue's CRD refuses it, before any webhook.
    pod_set["name"] = "Main"
    error = await _refused(kube, api_path(KUEUE, "workloads", namespace), workload)
    assert error.status == 422
    assert 'spec.podSets[0].name: Invalid value: "Main": spec.podSets[0].name in body should' in str(error)
    assert await kube.get_or_none(api_path(KUEUE, "workloads", namespace, "malformed")) is None
    flavor = {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": f"bad-{namespace}"},
        "spec": {"nodeLabels": {"nvidia.com/gpu.product": "Tesla T4"}},
    }
    error = await _refused(kube, api_path(KUEUE, "resourceflavors"), flavor)
    assert 'spec.nodeLabels: Invalid value: "Tesla T4"' in str(error)
    cohort = {
        "apiVersion": KUEUE,
        "kind": "Cohort",
        "metadata": {"name": f"root-{namespace}"},
        "spec": {"fairSharing": {"weight": "-1"}},
    }
    error = await _refused(kube, api_path(KUEUE, "cohorts"), cohort)
    assert error.status == 403
    assert (
        'admission webhook "vcohort.kb.io" denied the request: '
        'spec.fairSharing: Invalid value: "-1": must be greater than or equal to 0'
    ) in str(error)


@pytest.mark.asyncio
async def test_topology_requests_at_the_doors_and_topologies_are_stored(
    served: Served, kube: KubeClient, namespace: str
) -> None:
    """Kueue's Topology objects are stored; a TAS flavor is accepted and a badly named topology
    refused with the field named; a Job's placement annotation passes its webhook, a slice
    annotation is refused by name (not done here)."""
    await _ready(kube, namespace)
    levels = [{"nodeLabel": "cloud.com/topology-rack"}, {"nodeLabel": "kubernetes.io/hostname"}]
    topology = {"apiVersion": KUEUE, "kind": "Topology", "metadata": {"name": f"topo-{namespace}"}}
    stored = await kube.create(api_path(KUEUE, "topologies"), {**topology, "spec": {"levels": levels}})
    assert stored["spec"]["levels"] == levels
    await kube.delete(api_path(KUEUE, "topologies", name=f"topo-{namespace}"))
    flavor = {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": f"tas-{namespace}"},
        "spec": {"nodeLabels": {"pool": "gpu"}, "topologyName": f"topo-{namespace}"},
    }
    flavors = api_path(KUEUE, "resourceflavors")
    created = await kube.request("POST", flavors, params={"dryRun": "All"}, body=flavor)
    assert created["spec"]["topologyName"] == f"topo-{namespace}"
    bad = {**flavor, "spec": {"nodeLabels": {"pool": "gpu"}, "topologyName": "Topo_1"}}
    error = await _refused(kube, flavors, bad)
    assert error.status == 403
    assert (
        'admission webhook "vresourceflavor.kb.io" denied the request: spec.topologyName: Invalid value: '
        '"Topo_1": a lowercase RFC 1123 subdomain'
    ) in str(error)
    jobs = api_path("batch/v1", "jobs", namespace)
    job = queue_job("tas", namespace)
    job["spec"]["template"]["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = "rack"
    accepted = await kube.request("POST", jobs, params={"dryRun": "All"}, body=job)
    assert accepted["spec"]["suspend"] is True
    annotation = "kueue.x-k8s.io/podset-slice-required-topology"
    job["spec"]["template"]["metadata"]["annotations"][annotation] = "rack"
    error = await _refused(kube, jobs, job)
    assert (
        'admission webhook "vjob.kb.io" denied the request: '
        f"spec.template.metadata.annotations[{annotation}]: Forbidden: "
        "not supported by this controller's topology-aware scheduling"
    ) in str(error)
    assert await kube.get_or_none(api_path("batch/v1", "jobs", namespace, "tas")) is None


@pytest.mark.asyncio
async def test_a_new_certificate_is_served_without_a_restart(
    served: Served, kube: KubeClient, namespace: str
) -> None:
    """cert-manager renews: new files in the mounted directory, a new CA in the bundles."""
    await _ready(kube, namespace)
    pid = served.process.pid
    old = served.ca_pem
    bundle = new_bundle(["127.0.0.1"], dt.datetime.now(dt.UTC))
    configurations = on_loopback(shipped_configurations(), served.port, bundle.ca.cert_pem + old)
    await register(kube, configurations)  # both CAs trusted while the server switches
    write_cert_dir(served.cert_dir, bundle)

    async def switched() -> bool:
        context = ssl.create_default_context(cadata=bundle.ca.cert_pem.decode())
        try:
            _reader, writer = await asyncio.open_connection("127.0.0.1", served.port, ssl=context)
        except ssl.SSLError:
            return False
        writer.close()
        await writer.wait_closed()
        return True

    await wait_for("the server to present the new certificate", switched, within=30, interval=0.5)
    await register(kube, on_loopback(shipped_configurations(), served.port, bundle.ca.cert_pem))
    await _ready(kube, namespace)  # the API server now trusts only the new CA, and is answered
    served.ca_pem = bundle.ca.cert_pem
    assert served.process.pid == pid
    assert served.process.process is not None
    assert served.process.process.poll() is None


@pytest.mark.asyncio
async def test_with_the_webhook_down_a_queue_labelled_job_is_refused(
    served: Served, kube: KubeClient, namespace: str, testbed: Testbed
) -> None:
    await _ready(kube, namespace)
    assert await asyncio.to_thread(served.process.stop) == 0
    try:
        error = await _refused(kube, api_path("batch/v1", "jobs", namespace), queue_job("refused", namespace))
        assert error.status == 500
        # The API server's own words, quoted in docs/operations.md.
        assert re.search(
            r'HTTP 500 InternalError: Internal error occurred: failed calling webhook "mjob\.kb\.io": '
            r'failed to call webhook: Post "https://127\.0\.0\.1:\d+/mutate-batch-v1-job\?timeout=10s": '
            r"dial tcp 127\.0\.0\.1:\d+: connect: connection refused$",
            str(error),
        ), str(error)
        assert await kube.get_or_none(api_path("batch/v1", "jobs", namespace, "refused")) is None
        # kube-system is excluded, as in Kueue: the system's own Jobs never wait for the controller.
        system = api_path("batch/v1", "jobs", "kube-system")
        created = await kube.create(system, queue_job(f"system-{uuid.uuid4().hex[:6]}", "kube-system"))
        assert created["spec"]["suspend"] is False
        await kube.delete(
            f"{system}/{created['metadata']['name']}", params={"propagationPolicy": "Background"}
        )
    finally:
        served.process.start()
    await _ready(kube, namespace)


# --- internalCertManagement ---------------------------------------------------------------------


@pytest_asyncio.fixture
async def follower(
    served: Served, kube: KubeClient, namespace: str, testbed: Testbed, tmp_path: Path
) -> AsyncIterator[tuple[ControllerProcess, list[Obj], str]]:
    """A second replica (a follower: same Lease) managing its own certificate for service
    ``certs-webhook-service`` in ``namespace``, and configurations of that name confined to
    ``namespace`` and objects labelled for this test, with no CA bundle yet."""
    label = ("e2e.dra-quota.dev/webhook-test", namespace)

    async def main_leads() -> bool:
        url = f"http://127.0.0.1:{served.process.health_port}/readyz"
        async with aiohttp.ClientSession() as session, session.get(url) as resp:
            return resp.headers.get("X-Replica-Role") == "leader"

    await wait_for("the first replica to lead", main_leads, within=30)
    port = free_port()
    configurations = scoped(on_loopback(shipped_configurations(), port, None), "certs", namespace, label)
    await register(kube, configurations)
    config = _configuration(
        tmp_path / "config.yaml",
        namespace=namespace,
        internalCertManagement={"webhookServiceName": "certs-webhook-service", "webhookSecretName": "certs"},
    )
    process = ControllerProcess(
        config,
        testbed.kubeconfig,
        tmp_path / "follower.log",
        *ELECTION,
        "--webhook-cert-dir",
        str(tmp_path / "certs"),
        "--webhook-cert-extra-sans",
        "127.0.0.1",
        webhook_port=port,
    )
    await asyncio.to_thread(process.start)
    try:
        yield process, configurations, label[1]
    finally:
        code = await asyncio.to_thread(process.stop)
        await unregister(kube, configurations)
        assert code == 0, process.log_tail(30)


@pytest.mark.asyncio
async def test_internal_certificates_are_made_injected_and_trusted(
    follower: tuple[ControllerProcess, list[Obj], str], kube: KubeClient, namespace: str
) -> None:
    process, configurations, label = follower
    secret_path = api_path("v1", "secrets", namespace, "certs")
    secret = await wait_for("the certificate Secret", lambda: kube.get_or_none(secret_path), within=30)
    assert secret["type"] == "kubernetes.io/tls"
    ca = base64.b64decode(secret["data"]["ca.crt"])
    serving = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"certs-webhook-service.{namespace}.svc" in names.get_values_for_type(x509.DNSName)
    serving.verify_directly_issued_by(x509.load_pem_x509_certificate(ca))

    async def injected() -> bool:
        found = [
            await kube.get(f"/apis/admissionregistration.k8s.io/v1/{plural}/{c['metadata']['name']}")
            for c, plural in zip(
                configurations,
                ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"),
                strict=True,
            )
        ]
        bundles = [w["clientConfig"].get("caBundle") for c in found for w in c["webhooks"]]
        return all(b == secret["data"]["ca.crt"] for b in bundles)

    await wait_for("the CA bundle in every webhook", injected, within=30)
    # The API server calls the follower's webhook and trusts its certificate.
    await wait_until_jobs_are_suspended(kube, namespace)
    bad = _bad_cluster_queue(f"neg-{namespace}", {"e2e.dra-quota.dev/webhook-test": label})
    error = await _refused(kube, api_path(KUEUE, "clusterqueues"), bad)
    assert 'admission webhook "vclusterqueue.kb.io" denied the request' in str(error)
    # A follower is ready once its webhook serves.
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{process.health_port}/readyz") as resp,
    ):
        assert (resp.status, (await resp.text()).split(":")[0]) == (200, "standing by")


@pytest.mark.asyncio
async def test_a_webhook_port_taken_before_the_bind_is_chosen_again(
    testbed: Testbed, served: Served, tmp_path: Path
) -> None:
    # free_port() chooses a port and lets it go; another process on the machine may bind it first
    # (a CI run saw it: "address already in use", the controller exited). The test harness then
    # starts the controller again on new ports.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    config = _configuration(tmp_path / "config.yaml", internalCertManagement={"enable": False})
    loopback_certificate(tmp_path / "certs")
    process = ControllerProcess(
        config,
        testbed.kubeconfig,
        tmp_path / "controller.log",
        "--webhook-cert-dir",
        str(tmp_path / "certs"),
        webhook_port=port,
    )
    try:
        await asyncio.to_thread(process.start)
        await process.wait_ready_async()
        assert process.alive()
        assert process.webhook_port not in (None, port)
        assert "address already in use" in process.log_path.read_text()
    finally:
        process.stop()
        taken.close()
