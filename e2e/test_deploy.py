"""The manifests on the test-bed: rendered by kustomize, applied as they are, RBAC enough to run.

`kustomize build manifests` and `kustomize build manifests/prometheus` are
server-side applied object by object (Namespace, CRDs, RBAC, ConfigMap,
Service, Deployment, PDB, ServiceMonitor, PrometheusRule, dashboard
ConfigMap); the ServiceMonitor and PrometheusRule are validated by the real
prometheus-operator CRDs (pinned in e2e/versions.env, fetched by
e2e/build-binaries.sh). The test-bed has no kubelet, so the Deployment's pods
never run a controller; the controller runs instead as a child process
authenticated as the manifests' ServiceAccount with a TokenRequest token, and
the walkthrough must pass with exactly that access. Nor has the test-bed a
cluster network: the webhook configurations are applied with their Service
client configs turned into ``https://127.0.0.1:<port>`` URLs (failurePolicy,
rules and selectors as shipped), and the controller's internal certificate
management, as that ServiceAccount, creates the Secret and injects the CA
bundle before the walkthrough's objects go through the webhooks. The module has a test-bed
of its own, whose kube-apiserver authorizes with RBAC and also enforces
OwnerReferencesPermissionEnforcement.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from e2e.support.deploy import (
    ROOT,
    ControllerProcess,
    apply_objects,
    free_port,
    kustomize_build,
    request_token,
    token_kubeconfig,
)
from e2e.support.metrics_access import scrape, wait_listening
from e2e.support.walkthrough_steps import cleanup_walkthrough, walkthrough_items_1_to_6
from e2e.support.webhooks import configuration_path, on_loopback, wait_until_jobs_are_suspended
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.kubeclient import ApiError
from e2e.testbed.paths import binary_paths
from e2e.testbed.scenario import wait_for
from reconciler.config import load_config

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(420)]

NAMESPACE = "dra-quota-system"
VISIBILITY_SERVICE = "dra-quota-reconciler-visibility"
ACCOUNT = "dra-quota-reconciler"
USERNAME = f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
SECRET = "dra-quota-reconciler-webhook-server-cert"
ENFORCE_OWNER_REFERENCES = "--enable-admission-plugins=OwnerReferencesPermissionEnforcement"
WEBHOOK_PORT = free_port()
VISIBILITY_PORT = free_port()
Obj = dict[str, Any]


def _visibility_on_loopback(obj: Obj) -> Obj:
    """With no cluster network, the visibility API's Service names the host (an ExternalName:
    localhost) and its APIServices the controller's port there, so the aggregated API is
    available: an unavailable one would stop namespace deletion cluster-wide."""
    if obj["kind"] == "APIService":
        obj = copy.deepcopy(obj)
        obj["spec"]["service"]["port"] = VISIBILITY_PORT
    elif obj["kind"] == "Service" and obj["metadata"]["name"] == VISIBILITY_SERVICE:
        obj = copy.deepcopy(obj)
        obj["spec"] = {"type": "ExternalName", "externalName": "localhost", "ports": obj["spec"]["ports"]}
    return obj


def rendered() -> list[Obj]:
    """What kustomize renders, the webhook configurations called on loopback (no CA bundle: the
    controller injects it) and the visibility API on the host (`_visibility_on_loopback`)."""
    objects = kustomize_build(ROOT / "manifests") + kustomize_build(ROOT / "manifests" / "prometheus")
    return [
        on_loopback([o], WEBHOOK_PORT, None)[0]
        if o["kind"].endswith("WebhookConfiguration")
        else _visibility_on_loopback(o)
        for o in objects
    ]


def monitoring_crds() -> list[Obj]:
    return [yaml.safe_load(p.read_text()) for p in binary_paths().monitoring_crd_files()]


async def _delete_if_present(kube: KubeClient, path: str) -> None:
    try:
        await kube.delete(path)
    except ApiError as err:
        if err.status != 404:
            raise


@pytest.fixture(scope="module")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    """A test-bed of this module's own whose kube-apiserver also enforces
    OwnerReferencesPermissionEnforcement, as some clusters do (OpenShift): setting
    blockOwnerDeletion then needs update on the owner's finalizers, so the walkthrough
    proves the ClusterRole's jobs/finalizers rule. (The plugin never denies the admin
    kubeconfig, which is in system:masters; the HA failures once blamed on it were the
    own-write race fixed in 4f93f13, and they reproduce without it on the older code.)"""
    with Testbed(
        run_dir=tmp_path_factory.mktemp("testbed-deploy"), apiserver_args=(ENFORCE_OWNER_REFERENCES,)
    ) as bed:
        yield bed


@pytest.fixture(scope="module")
def installed(testbed: Testbed) -> Iterator[list[Obj]]:
    """Everything rendered, applied; removed again afterwards (the CRDs stay: other tests use them).

    The Deployment's pods would be run by the node simulator as empty shells;
    deleting the namespace stops that."""
    objects = rendered()

    async def install() -> list[Obj]:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await apply_objects(kube, monitoring_crds())
            return await apply_objects(kube, objects, field_manager="dra-quota-kustomize")

    async def uninstall() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            for obj in objects:
                if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
                    group = "rbac.authorization.k8s.io/v1"
                    plural = obj["kind"].lower() + "s"
                    await _delete_if_present(kube, api_path(group, plural, name=obj["metadata"]["name"]))
                if obj["kind"].endswith("WebhookConfiguration"):
                    await _delete_if_present(kube, configuration_path(obj))
                if obj["kind"] == "APIService":  # first: the controller no longer serves it
                    path = api_path("apiregistration.k8s.io/v1", "apiservices", name=obj["metadata"]["name"])
                    await _delete_if_present(kube, path)
            path = api_path("v1", "namespaces", name=NAMESPACE)
            await _delete_if_present(kube, path)

            async def gone() -> bool:
                return await kube.get_or_none(path) is None

            await wait_for(f"namespace {NAMESPACE} to be deleted", gone, within=90)

    applied = asyncio.run(install())
    try:
        yield applied
    finally:
        asyncio.run(uninstall())


@pytest_asyncio.fixture
async def admin(testbed: Testbed) -> Any:
    async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
        yield kube


def _by_kind(objects: list[Obj], kind: str) -> Obj:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def test_everything_rendered_is_applied(installed: list[Obj]) -> None:
    kinds = sorted(o["kind"] for o in installed)
    assert kinds == sorted(
        [
            "Namespace",
            *["CustomResourceDefinition"] * len(list((ROOT / "manifests" / "crds").glob("*.yaml"))),
            "ServiceAccount",
            "ClusterRole",
            "ClusterRole",  # dra-quota-reconciler-metrics-reader
            "ClusterRoleBinding",
            "ClusterRoleBinding",  # of metrics-reader, to Prometheus' ServiceAccount (the add-on)
            "Role",
            "Role",
            "RoleBinding",
            "RoleBinding",
            "ConfigMap",
            "Service",
            "Service",
            "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration",
            "Deployment",
            "PodDisruptionBudget",
            "ServiceMonitor",
            "PrometheusRule",
            "ConfigMap",
            # The visibility API (manifests/visibility.yaml): its two APIServices and the dry run's,
            # Service, reader ClusterRoles and the dry run's creator role, the delegated
            # authentication and authorization bindings, flow control.
            *["APIService"] * 3,
            "Service",
            *["ClusterRole"] * 3,
            "ClusterRoleBinding",
            "RoleBinding",
            "FlowSchema",
            "PriorityLevelConfiguration",
        ]
    )
    # What the API server made of them.
    assert all(
        s["spec"]["clusterIP"]
        for s in installed
        if s["kind"] == "Service" and s["metadata"]["name"] != VISIBILITY_SERVICE  # (ExternalName here)
    )
    deployment = _by_kind(installed, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    rule = _by_kind(installed, "PrometheusRule")
    assert len(rule["spec"]["groups"]) == 2


def test_the_configmap_holds_a_valid_configuration(installed: list[Obj], tmp_path: Path) -> None:
    deployment = _by_kind(installed, "Deployment")
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    config_map_name = volumes["config"]["configMap"]["name"]
    (config_map,) = [
        o for o in installed if o["kind"] == "ConfigMap" and o["metadata"]["name"] == config_map_name
    ]
    assert config_map_name.startswith("dra-quota-reconciler-config-")  # kustomize's content hash
    path = tmp_path / "config.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    assert load_config(str(path)).wait_for_pods_ready is not None


@pytest.mark.asyncio
async def test_pod_security_admits_the_pod_and_enforces_restricted(
    installed: list[Obj], admin: KubeClient
) -> None:
    namespace = _by_kind(installed, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    template = _by_kind(installed, "Deployment")["spec"]["template"]
    pods = api_path("v1", "pods", NAMESPACE)
    pod: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe", **template["metadata"]}}
    pod["spec"] = template["spec"]
    created = await admin.request("POST", pods, params={"dryRun": "All"}, body=pod)
    assert created["metadata"]["name"] == "probe"
    # Control: the same pod without its security settings is refused.
    loose = copy.deepcopy(pod)
    del loose["spec"]["securityContext"]
    del loose["spec"]["containers"][0]["securityContext"]
    with pytest.raises(ApiError) as refused:
        await admin.request("POST", pods, params={"dryRun": "All"}, body=loose)
    assert refused.value.status == 403
    assert "violates PodSecurity" in str(refused.value)


@pytest.mark.asyncio
async def test_service_account_token_has_exactly_its_roles(
    installed: list[Obj], admin: KubeClient, testbed: Testbed, tmp_path: Path
) -> None:
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    reviews = api_path("authentication.k8s.io/v1", "selfsubjectreviews")
    me = await admin.create(reviews, review)
    assert "system:masters" in me["status"]["userInfo"]["groups"]  # the admin stays admin

    token = await request_token(admin, NAMESPACE, ACCOUNT, seconds=600)
    kubeconfig = token_kubeconfig(testbed.kubeconfig, token, USERNAME, tmp_path / "sa.kubeconfig")
    async with KubeClient.from_kubeconfig(kubeconfig) as sa:
        me = await sa.create(reviews, review)
        assert me["status"]["userInfo"]["username"] == USERNAME
        assert "system:masters" not in me["status"]["userInfo"]["groups"]
        # The ClusterRole: Workloads may be listed everywhere, Secrets not at all.
        # (Retried: just after a CRD is applied its storage may answer 429 for a moment.)
        workloads = api_path("kueue.x-k8s.io/v1beta2", "workloads")
        await wait_for("Workloads to be listed with the token", lambda: sa.get(workloads), within=30)
        for forbidden in (api_path("v1", "secrets", NAMESPACE), api_path("v1", "configmaps", "default")):
            with pytest.raises(ApiError) as denied:
                await sa.get(forbidden)
            assert denied.value.status == 403
        # The Role: the Lease in its own namespace, nowhere else.
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "rbac-probe"},
            "spec": {"holderIdentity": "probe", "leaseDurationSeconds": 15},
        }
        leases = api_path("coordination.k8s.io/v1", "leases", NAMESPACE)
        # Creating names no object; reading and renewing name the controller's Lease only.
        created = await sa.create(leases, lease)
        created["spec"]["holderIdentity"] = "probe-2"
        for call in (sa.request("PUT", f"{leases}/rbac-probe", body=created), sa.get(f"{leases}/rbac-probe")):
            with pytest.raises(ApiError) as denied:
                await call
            assert denied.value.status == 403
        status = 200
        try:
            await sa.get(f"{leases}/dra-quota-reconciler")  # the Deployment's --leader-election-id
        except ApiError as err:
            status = err.status
        assert status in (200, 404)  # allowed (404: only not there yet)
        with pytest.raises(ApiError) as denied:
            await sa.create(api_path("coordination.k8s.io/v1", "leases", "default"), lease)
        assert denied.value.status == 403
        with pytest.raises(ApiError) as denied:
            await sa.delete(f"{leases}/rbac-probe")
        assert denied.value.status == 403
        # OwnerReferencesPermissionEnforcement is on: blockOwnerDeletion on an owner whose
        # finalizers the account may not update is refused (on a Job it may, see the ClusterRole).
        owner = await admin.create(
            api_path("v1", "configmaps", NAMESPACE),
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner-probe"}},
        )
        reference = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner-probe",
            "uid": owner["metadata"]["uid"],
            "blockOwnerDeletion": True,
        }
        owned = {**lease, "metadata": {"name": "owned-probe", "ownerReferences": [reference]}}
        with pytest.raises(ApiError) as denied:
            await sa.create(leases, owned)
        assert denied.value.status == 403
        assert "blockOwnerDeletion" in str(denied.value)


@pytest.mark.asyncio
async def test_walkthrough_as_the_service_account(
    installed: list[Obj], admin: KubeClient, testbed: Testbed, tmp_path: Path
) -> None:
    """Items 1 to 6 with the controller holding only the manifests' RBAC, and their configuration;
    its secure /metrics reviews tokens with that RBAC (a token not allowed get on /metrics: 403)."""
    config_map = next(o for o in installed if o["kind"] == "ConfigMap" and "config.yaml" in o.get("data", {}))
    config = tmp_path / "config.yaml"
    config.write_text(config_map["data"]["config.yaml"])
    token = await request_token(admin, NAMESPACE, ACCOUNT)
    kubeconfig = token_kubeconfig(testbed.kubeconfig, token, USERNAME, tmp_path / "sa.kubeconfig")
    controller = ControllerProcess(
        config,
        kubeconfig,
        tmp_path / "controller.log",
        "--webhook-cert-dir",
        str(tmp_path / "certs"),
        "--webhook-cert-extra-sans",
        "127.0.0.1",
        webhook_port=WEBHOOK_PORT,
        visibility_port=VISIBILITY_PORT,
        metrics_secure=True,
    )
    controller.start()
    try:
        # Internal certificate management with the Role and ClusterRole only: the Secret made,
        # the CA injected into both configurations, the API server answered by the webhook.
        secret = await wait_for(
            "the webhook certificate Secret",
            lambda: admin.get_or_none(api_path("v1", "secrets", NAMESPACE, SECRET)),
            within=60,
        )
        for configuration in (o for o in installed if o["kind"].endswith("WebhookConfiguration")):

            async def injected(configuration: Obj = configuration) -> bool:
                current = await admin.get(configuration_path(configuration))
                return all(
                    w["clientConfig"].get("caBundle") == secret["data"]["ca.crt"] for w in current["webhooks"]
                )

            await wait_for(f"the CA bundle in {configuration['metadata']['name']}", injected, within=60)
        await wait_until_jobs_are_suspended(admin, "default")
        await walkthrough_items_1_to_6(admin)
        # The TokenReview and the SubjectAccessReview succeed with the ClusterRole: the account's
        # own token is authenticated (not 401) and denied get on /metrics (403, not 500).
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            await wait_listening(http, controller.metrics_port)
            assert (await scrape(http, controller.metrics_port, None))[0] == 401
            status, text = await scrape(http, controller.metrics_port, token)
            assert (status, text.strip()) == (403, f"Authorization denied for user {USERNAME}: get /metrics")
    except BaseException:
        print(controller.log_tail(60))
        raise
    finally:
        await cleanup_walkthrough(admin)
        code = controller.stop()
    log = controller.log_path.read_text()
    assert code == 0, controller.log_tail(30)
    assert "forbidden" not in log.lower(), [line for line in log.splitlines() if "orbidden" in line][:5]
