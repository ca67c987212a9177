"""The dry run through the API (beyond Kueue), through the test-bed's real kube-apiserver.

The controller serves `whatif.dra-quota.dev/v1alpha1` `whatifs` beside Kueue's visibility API; the
shipped APIServices are registered as e2e/support/aggregation.py registers Kueue's (a Service of
type ExternalName `localhost`, the controller's loopback port), so each request reaches the
controller through the API server's front proxy and is authorized by a SubjectAccessReview.

Checked: a WhatIf posted through the API server (with a client and with `kubectl create --raw`)
answers that a high-priority Workload would be admitted now by preempting two running ones, the one
of the asker's namespace named, the other's not; nothing is created. A user without the
permission is refused (403); bound to the shipped role in the namespace, the same user is answered.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.support.aggregation import bind_user, delete_all, register_visibility, unregister_visibility
from e2e.support.deploy import ROOT, ControllerProcess, free_port, install_crds
from e2e.support.workloads import KUEUE, reserved
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.paths import cache_dir, read_versions
from e2e.testbed.scenario import wait_for

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(240)]

Obj = dict[str, Any]
WHATIF = "whatif.dra-quota.dev/v1alpha1"


@pytest.fixture(scope="module")
def served(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    """The controller with its visibility server on a loopback port, Kueue's group and the dry
    run's registered with the API server (unregistered at the end)."""

    async def install() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(install())
    process = ControllerProcess(
        ROOT / "examples/walkthrough/00-configuration.yaml",
        testbed.kubeconfig,
        tmp_path_factory.mktemp("dry-run") / "controller.log",
        visibility_port=free_port(),
    )
    process.start()
    process.wait_ready()

    async def register(on: bool) -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            if on:
                assert process.visibility_port is not None
                await register_visibility(kube, process.visibility_port, whatif=True)
            else:
                await unregister_visibility(kube)

    try:
        asyncio.run(register(True))
        yield process
    finally:
        asyncio.run(register(False))
        code = process.stop()
        assert code == 0, f"the controller did not stop cleanly (exit {code}):\n{process.log_tail(30)}"


def _workload(namespace: str, name: str, priority: int, cpus: int = 1) -> Obj:
    container = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": str(cpus)}}}
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "queueName": "lq",
            "priority": priority,
            "podSets": [{"name": "main", "count": 1, "template": {"spec": {"containers": [container]}}}],
        },
    }


async def _queues(kube: KubeClient, cq: str, namespaces: list[str]) -> None:
    """A ClusterQueue of 2 CPUs for `namespaces`, preempting lower priorities; LocalQueue `lq` in each."""
    await kube.create(
        api_path(KUEUE, "resourceflavors"),
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": cq}, "spec": {}},
    )
    selector = {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}]
    }
    quota = {"name": cq, "resources": [{"name": "cpu", "nominalQuota": "2"}]}
    spec = {
        "namespaceSelector": selector,
        "preemption": {"withinClusterQueue": "LowerPriority"},
        "resourceGroups": [{"coveredResources": ["cpu"], "flavors": [quota]}],
    }
    await kube.create(
        api_path(KUEUE, "clusterqueues"),
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec},
    )
    for ns in namespaces:
        await kube.create(
            api_path(KUEUE, "localqueues", ns),
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": ns},
                "spec": {"clusterQueue": cq},
            },
        )


def _kubectl_create_raw(kubeconfig: Path, path: str, body: Obj, workdir: Path) -> Obj:
    kubectl = cache_dir() / f"kubernetes-{read_versions().kubernetes}" / "bin" / "kubectl"
    request = workdir / "whatif.json"
    request.write_text(json.dumps(body))
    done = subprocess.run(
        [str(kubectl), "--kubeconfig", str(kubeconfig), "create", "--raw", path, "-f", str(request)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"kubectl create --raw {path}: {done.stderr}"
    answer: Obj = json.loads(done.stdout)
    return answer


@pytest.mark.asyncio
async def test_a_dry_run_through_the_api_server_names_only_the_askers_victims(
    served: ControllerProcess, kube: KubeClient, namespace: str, testbed: Testbed, tmp_path: Path
) -> None:
    other = f"t-{uuid.uuid4().hex[:8]}"
    await kube.create(
        api_path("v1", "namespaces"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": other}}
    )
    cq = f"dry-{namespace}"
    try:
        await _queues(kube, cq, [namespace, other])
        await kube.create(api_path(KUEUE, "workloads", namespace), _workload(namespace, "mine", 1))
        await kube.create(api_path(KUEUE, "workloads", other), _workload(other, "theirs", 1))

        async def both_admitted() -> bool:
            for ns, name in ((namespace, "mine"), (other, "theirs")):
                if not reserved(await kube.get(api_path(KUEUE, "workloads", ns, name))):
                    return False
            return True

        await wait_for("both low Workloads admitted", both_admitted, within=60)
        path = f"/apis/{WHATIF}/namespaces/{namespace}/whatifs"
        body = {
            "apiVersion": WHATIF,
            "kind": "WhatIf",
            "spec": {"objects": [_workload(namespace, "urgent", 10, cpus=2)]},
        }
        async with kube.session.post(kube.server + path, json=body) as resp:
            assert resp.status == 201, await resp.text()
            answer = await resp.json()
        (verdict,) = answer["status"]["workloads"]
        assert (verdict["workload"], verdict["admitted"], verdict["clusterQueue"]) == ("urgent", True, cq)
        victims = sorted((v["namespace"], v["name"], v["reason"]) for v in verdict["preempts"])
        assert victims == [("", "", "InClusterQueue"), (namespace, "mine", "InClusterQueue")]
        assert "theirs" not in json.dumps(answer)
        # kubectl reaches the same answer; and nothing was created by either.
        again = await asyncio.to_thread(_kubectl_create_raw, testbed.kubeconfig, path, body, tmp_path)
        assert again["status"]["workloads"][0]["admitted"] is True
        items, _ = await kube.list_all(api_path(KUEUE, "workloads", namespace))
        assert [w["metadata"]["name"] for w in items] == ["mine"]
    finally:
        await delete_all(
            kube,
            [
                api_path(KUEUE, "clusterqueues", name=cq),
                api_path(KUEUE, "resourceflavors", name=cq),
                api_path("v1", "namespaces", name=other),
            ],
        )


@pytest.mark.asyncio
async def test_only_a_user_with_the_shipped_role_in_the_namespace_may_ask(
    served: ControllerProcess, kube: KubeClient, namespace: str
) -> None:
    user = f"dev-{uuid.uuid4().hex[:6]}"
    path = f"/apis/{WHATIF}/namespaces/{namespace}/whatifs"
    body = {"apiVersion": WHATIF, "kind": "WhatIf", "spec": {"objects": [_workload(namespace, "w", 1)]}}

    async def as_user() -> tuple[int, Obj]:
        async with kube.session.post(
            kube.server + path, json=body, headers={"Impersonate-User": user}
        ) as resp:
            return resp.status, await resp.json()

    status, refused = await as_user()
    assert status == 403, refused
    assert f'User "{user}" cannot create resource "whatifs"' in refused["message"]
    await bind_user(kube, namespace, "dra-quota-reconciler-whatif-creator", user)

    async def answered() -> bool:
        status, _ = await as_user()
        return status == 201

    await wait_for("the bound user to be answered", answered, within=30)
    status, answer = await as_user()
    (verdict,) = answer["status"]["workloads"]
    assert verdict["admitted"] is False  # no LocalQueue `lq` here: it would wait
    assert verdict["waiting"]
