"""Fast checks of the test-bed's pure parts (no processes started)."""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from e2e.testbed.errors import TestbedError
from e2e.testbed.fakedriver import device_class, gpu_devices, gpu_uuid, resource_slice
from e2e.testbed.health import Probe, wait_until_healthy
from e2e.testbed.kubeclient import Obj, api_path
from e2e.testbed.names import DEVICE_CLASS_SELECTOR, RUN_SECONDS_ANNOTATION
from e2e.testbed.paths import binary_paths, read_versions
from e2e.testbed.pki import generate_pki
from e2e.testbed.podstatus import claims_blocking, finished_patch, run_seconds, running_patch
from e2e.testbed.ports import free_ports
from e2e.testbed.processes import ManagedProcess
from e2e.testbed.spec import GpuSpec, NodeSpec, TestbedSpec, default_spec, dump_spec, load_spec
from e2e.testbed.testbed import Testbed


def _pod(
    claims: list[Obj] | None = None,
    statuses: list[Obj] | None = None,
    annotations: dict[str, str] | None = None,
) -> Obj:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "annotations": annotations or {}},
        "spec": {
            "resourceClaims": claims or [],
            "nodeName": "gpu-node-1",
            "containers": [{"name": "c", "image": "repo/img:1.0"}],
        },
        "status": {"resourceClaimStatuses": statuses or []},
    }


TEMPLATE_CLAIM = [{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]


def test_claims_rule_follows_kubelet() -> None:
    assert claims_blocking(_pod(), {}) is None
    assert "not created" in str(claims_blocking(_pod(TEMPLATE_CLAIM), {}))
    pod = _pod(TEMPLATE_CLAIM, [{"name": "gpu", "resourceClaimName": "p-gpu"}])
    assert "not found" in str(claims_blocking(pod, {}))
    claim: Obj = {"metadata": {"name": "p-gpu"}, "status": {}}
    assert "not allocated" in str(claims_blocking(pod, {"ns/p-gpu": claim}))
    claim["status"]["allocation"] = {"devices": {"results": []}}
    assert "not reserved" in str(claims_blocking(pod, {"ns/p-gpu": claim}))
    claim["status"]["reservedFor"] = [{"resource": "pods", "name": "other", "uid": "u2"}]
    assert "not reserved" in str(claims_blocking(pod, {"ns/p-gpu": claim}))
    claim["status"]["reservedFor"].append({"resource": "pods", "name": "p", "uid": "u1"})
    assert claims_blocking(pod, {"ns/p-gpu": claim}) is None
    # A template that needs no claim: the status names none.
    assert claims_blocking(_pod(TEMPLATE_CLAIM, [{"name": "gpu"}]), {}) is None


def test_run_seconds_annotation() -> None:
    assert run_seconds(_pod(), 30) == 30
    assert run_seconds(_pod(annotations={RUN_SECONDS_ANNOTATION: "2.5"}), 30) == 2.5
    assert math.isinf(run_seconds(_pod(annotations={RUN_SECONDS_ANNOTATION: "forever"}), 30))
    assert run_seconds(_pod(annotations={RUN_SECONDS_ANNOTATION: "-1"}), 30) == 30
    assert run_seconds(_pod(annotations={RUN_SECONDS_ANNOTATION: "soon"}), 30) == 30


def test_status_patches_replace_container_state() -> None:
    running = running_patch(_pod(), "172.30.0.2", "10.244.0.2")["status"]
    assert running["phase"] == "Running"
    state = running["containerStatuses"][0]["state"]
    assert state["running"]
    assert state["waiting"] is None
    assert state["terminated"] is None
    assert running["containerStatuses"][0]["imageID"].startswith("repo/img@sha256:")
    failed = finished_patch(_pod(), 1)["status"]
    assert failed["phase"] == "Failed"
    assert failed["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 1
    assert failed["containerStatuses"][0]["state"]["running"] is None


def test_spec_yaml_round_trip_and_validation(tmp_path: Path) -> None:
    spec = TestbedSpec(
        pod_run_seconds=5,
        nodes=[
            NodeSpec(name="n1", labels={"a": "b"}, gpus=GpuSpec(count=3, model="H100-80GB-HBM3")),
            NodeSpec(name="n2"),
        ],
    )
    path = tmp_path / "spec.yaml"
    path.write_text(dump_spec(spec))
    assert load_spec(path) == spec
    assert "podRunSeconds: 5" in path.read_text()
    path.write_text("nodes: [{name: x, gpus: {model: nope}}]\n")
    with pytest.raises(ValueError, match="unknown GPU model"):
        load_spec(path)
    path.write_text("nodes: [{name: x, colour: red}]\n")
    with pytest.raises(ValueError, match="colour"):
        load_spec(path)
    with pytest.raises(ValueError, match="unique"):
        TestbedSpec(nodes=[NodeSpec(name="x"), NodeSpec(name="x")])


def test_default_spec_is_one_t4_node() -> None:
    (node,) = default_spec().nodes
    assert node.name == "gpu-node-1"
    assert node.labels == {"nvidia.com/gpu.product": "Tesla-T4"}
    (device,) = gpu_devices(node)
    assert device["name"] == "gpu-0"
    attrs = device["attributes"]
    assert attrs["type"] == {"string": "gpu"}
    assert attrs["productName"] == {"string": "Tesla T4"}
    assert attrs["architecture"] == {"string": "Turing"}
    assert attrs["cudaComputeCapability"] == {"version": "7.5.0"}
    assert attrs["uuid"] == {"string": gpu_uuid("gpu-node-1", 0)}
    assert device["capacity"] == {"memory": {"value": "16Gi"}}


def test_slice_and_class_shape() -> None:
    node = default_spec().nodes[0]
    body = resource_slice(node.name, "uid-1", gpu_devices(node), 3)
    assert body["spec"]["pool"] == {"name": "gpu-node-1", "generation": 3, "resourceSliceCount": 1}
    assert body["spec"]["driver"] == "gpu.nvidia.com"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    cls = device_class()
    assert cls["spec"]["selectors"] == [{"cel": {"expression": DEVICE_CLASS_SELECTOR}}]
    assert gpu_uuid("n", 0) == gpu_uuid("n", 0) != gpu_uuid("n", 1)


def test_pki_chain(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    ca = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    admin = x509.load_pem_x509_certificate(pki.admin_cert.read_bytes())
    serving = x509.load_pem_x509_certificate(pki.serving_cert.read_bytes())
    admin.verify_directly_issued_by(ca)
    serving.verify_directly_issued_by(ca)
    orgs = admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)
    assert [o.value for o in orgs] == ["system:masters"]
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert (pki.sa_private_key.stat().st_mode & 0o777) == 0o600


def test_versions_and_cache_layout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    versions = read_versions()
    assert versions.kubernetes.startswith("v1.")
    monkeypatch.setenv("TESTBED_CACHE", str(tmp_path))
    paths = binary_paths()
    assert paths.kube_apiserver == tmp_path / f"kubernetes-{versions.kubernetes}/bin/kube-apiserver"
    assert paths.etcd == tmp_path / f"etcd-{versions.etcd}/bin/etcd"
    assert paths.kustomize == tmp_path / f"kustomize-{versions.kustomize}/bin/kustomize"
    assert paths.helm == tmp_path / f"helm-{versions.helm}/bin/helm"
    assert paths.promtool == tmp_path / f"prometheus-{versions.prometheus}/bin/promtool"
    assert tmp_path / f"prometheus-operator-crds-{versions.prometheus_operator}" in {
        p.parent for p in paths.monitoring_crd_files()
    }
    assert set(paths.missing()) >= {paths.kustomize, paths.helm, *paths.monitoring_crd_files()}


def test_api_paths() -> None:
    assert api_path("v1", "pods", "ns", "p", "status") == "/api/v1/namespaces/ns/pods/p/status"
    assert api_path("resource.k8s.io/v1", "resourceslices") == "/apis/resource.k8s.io/v1/resourceslices"


def test_failed_start_quotes_the_log(tmp_path: Path) -> None:
    proc = ManagedProcess(
        name="broken",
        argv=["/bin/sh", "-c", "echo boom: bad flag; exit 3"],
        log_path=tmp_path / "broken.log",
        pid_path=tmp_path / "broken.pid",
        cwd=tmp_path,
    )
    proc.start()
    with pytest.raises(TestbedError, match="boom: bad flag"):
        wait_until_healthy(
            "broken", Probe(f"http://127.0.0.1:{free_ports(1)[0]}/healthz"), 10, proc.running, proc.tail
        )
    proc.stop()
    assert not (tmp_path / "broken.pid").exists()


def test_stop_escalates_to_sigkill(tmp_path: Path) -> None:
    proc = ManagedProcess(
        name="stubborn",
        argv=["/bin/sh", "-c", "trap '' TERM; echo ready; exec sleep 60"],
        log_path=tmp_path / "s.log",
        pid_path=tmp_path / "s.pid",
        cwd=tmp_path,
    )
    proc.start()
    deadline = time.monotonic() + 5
    while "ready" not in proc.tail() and time.monotonic() < deadline:
        time.sleep(0.05)
    popen = proc.popen
    assert popen is not None
    began = time.monotonic()
    proc.stop(grace=0.5)
    assert popen.returncode == -signal.SIGKILL
    assert time.monotonic() - began < 5


def test_start_refuses_to_clear_a_foreign_folder(tmp_path: Path) -> None:
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(TestbedError, match="refusing"):
        Testbed(run_dir=tmp_path, build=False, echo=None).start()
    assert (tmp_path / "precious.txt").read_text() == "keep me"
