"""Kubeflow's operators run out of cluster on the test-bed (built by `e2e/build-binaries.sh
--kubeflow`): the training-operator v1 manager (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob)
with its CRDs and validating webhooks, and mpi-operator (MPIJob v2beta1) with its CRD.

The training-operator v1.9.3 cannot turn its cert management off: its main package always starts
cert-controller's rotator, which reads the Secret `training-operator-webhook-cert` in the namespace
`$MY_POD_NAMESPACE` (`kubeflow`), keeps it only when its CA verifies for the name
`training-operator-ca` and its serving certificate for `training-operator.kubeflow.svc` (else it
writes new ones), expects the serving files mounted at the fixed path
/tmp/k8s-webhook-server/serving-certs, and waits for the CA to be injected into the
ValidatingWebhookConfiguration `validator.training-operator.kubeflow.org` before it sets up any
controller. So here: a CA and a serving certificate that satisfy the rotator and also name
127.0.0.1 are stored in that Secret; the manager runs in a private mount namespace whose
/tmp/k8s-webhook-server is its own folder holding them (concurrent runs do not share it); its
webhook configuration is registered under that name with `url` client configs on loopback.
Metrics are off; health probes on a loopback port; only the five v1 kinds Kueue handles are
enabled (`--enable-scheme`): its v1 MPIJob would want the CRD name mpi-operator's v2beta1 takes.

mpi-operator v0.8.0 always runs leader election (Lease `mpi-operator` in `--lock-namespace`) and
serves its health check on the fixed port :8080; two at once on one machine would collide there,
so each holds a machine-wide lock (flock) for its lifetime and a second one waits for the first.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from e2e.support.deploy import apply_manifests, free_port, load_documents, wait_established
from e2e.support.process import ManagedProcess
from e2e.support.upstream import UpstreamBuild, enables, upstream_build
from e2e.support.webhooks import configuration_path, on_loopback
from e2e.testbed import ApiError, KubeClient, api_path
from reconciler.webhook.certs import KeyPair

__all__ = [
    "KUBEFLOW_FRAMEWORKS",
    "KubeflowOperators",
    "MpiOperatorProcess",
    "TrainingOperatorProcess",
    "enables_kubeflow",
    "install_kubeflow_crds",
    "mpi_operator_build",
    "training_operator_build",
    "training_operator_webhooks",
]

Obj = dict[str, Any]
KUBEFLOW_FRAMEWORKS = (
    "kubeflow.org/pytorchjob",
    "kubeflow.org/tfjob",
    "kubeflow.org/xgboostjob",
    "kubeflow.org/paddlejob",
    "kubeflow.org/jaxjob",
    "kubeflow.org/mpijob",
)
OPERATOR_NAMESPACE = "kubeflow"
SECRET_NAME = "training-operator-webhook-cert"
WEBHOOK_CONFIGURATION = "validator.training-operator.kubeflow.org"
_CA_NAME = "training-operator-ca"
_SERVICE_NAME = f"training-operator.{OPERATOR_NAMESPACE}.svc"
_SCHEMES = ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")


def training_operator_build(cache: Path | None = None) -> UpstreamBuild:
    return upstream_build("training-operator", "TRAINING_OPERATOR_VERSION", "kubeflow", cache)


def mpi_operator_build(cache: Path | None = None) -> UpstreamBuild:
    return upstream_build("mpi-operator", "MPI_OPERATOR_VERSION", "kubeflow", cache)


def enables_kubeflow(configuration: Path) -> bool:
    """Whether a Configuration file names any of the Kubeflow frameworks."""
    return any(enables(configuration, f) for f in KUBEFLOW_FRAMEWORKS)


async def install_kubeflow_crds(kube: Any) -> None:
    """The training-operator's five CRDs and mpi-operator's MPIJob CRD, established."""
    files: list[Path] = []
    for build in (training_operator_build(), mpi_operator_build()):
        if not build.binary.exists() or not build.crd_files():
            raise FileNotFoundError(
                f"{build.name} is not built ({build.binary}): run e2e/setup.sh --kubeflow"
            )
        files += build.crd_files()
    await wait_established(kube, await apply_manifests(kube, *files))


def _rotator_certificates(now: dt.datetime) -> tuple[KeyPair, KeyPair]:
    """A CA and a serving certificate the rotator keeps: it verifies the CA for the DNS name
    `training-operator-ca` and reads its key as PKCS#1 RSA; the serving certificate names the
    operator's Service (which the rotator checks) and 127.0.0.1 (which the API server calls)."""
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, _CA_NAME)])
    begin, end = now - dt.timedelta(hours=1), now + dt.timedelta(days=3650)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(begin)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(_CA_NAME)]), critical=False)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    serving = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, _SERVICE_NAME)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(begin)
        .not_valid_after(end)
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(_SERVICE_NAME), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    def pkcs1(k: rsa.RSAPrivateKey) -> bytes:
        return k.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )

    pem = serialization.Encoding.PEM
    return KeyPair(ca_cert.public_bytes(pem), pkcs1(ca_key)), KeyPair(serving.public_bytes(pem), pkcs1(key))


def training_operator_webhooks(build: UpstreamBuild, port: int, ca_pem: bytes) -> list[Obj]:
    """Its validating webhook configuration, named as its kustomize build names it (the rotator
    injects the CA there), each webhook called at 127.0.0.1:port."""
    out = on_loopback(load_documents(build.webhook / "manifests.yaml"), port, ca_pem)
    for configuration in out:
        configuration["metadata"] = {"name": WEBHOOK_CONFIGURATION}
    return out


class TrainingOperatorProcess(ManagedProcess):
    """The training-operator v1 manager as a child process in a private mount namespace."""

    what = "the training-operator"
    ready_within = 120.0

    def __init__(self, build: UpstreamBuild, kubeconfig: Path, workdir: Path) -> None:
        self.build = build
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.health_port = free_port()
        self.webhook_port = free_port()
        self.log_path = workdir / "training-operator.log"
        self.ca_pem = b""
        self.process: subprocess.Popen[bytes] | None = None
        self._secret: Obj = {}

    def prepare(self) -> Obj:
        """The certificates, written where the manager reads them; returns their Secret."""
        now = dt.datetime.now(dt.UTC)
        ca, serving = _rotator_certificates(now)
        certs = self.workdir / "k8s-webhook-server" / "serving-certs"
        certs.mkdir(parents=True, exist_ok=True)
        for name, content in (
            ("tls.crt", serving.cert_pem),
            ("tls.key", serving.key_pem),
            ("ca.crt", ca.cert_pem),
            ("ca.key", ca.key_pem),
        ):
            (certs / name).write_bytes(content)
        self.ca_pem = ca.cert_pem
        data = {
            "ca.crt": ca.cert_pem,
            "ca.key": ca.key_pem,
            "tls.crt": serving.cert_pem,
            "tls.key": serving.key_pem,
        }
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": SECRET_NAME, "namespace": OPERATOR_NAMESPACE},
            "type": "Opaque",
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
        }

    async def install_secret(self, kube: KubeClient) -> None:
        """The operator's namespace and its certificates' Secret (replaced when present)."""
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}}
        try:
            await kube.create(api_path("v1", "namespaces"), namespace)
        except ApiError as err:
            if err.status != 409:
                raise
        secret = self.prepare()
        path = api_path("v1", "secrets", OPERATOR_NAMESPACE, SECRET_NAME)
        await kube.apply(path, secret, "dra-quota-e2e")

    def start(self) -> None:
        q = shlex.quote
        mounted = self.workdir / "k8s-webhook-server"
        args = [
            str(self.build.binary),
            "--metrics-bind-address=0",
            f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
            f"--webhook-server-port={self.webhook_port}",
            *(f"--enable-scheme={s}" for s in _SCHEMES),
            "--zap-log-level=2",
        ]
        script = (
            "mkdir -p /tmp/k8s-webhook-server"
            f" && mount --bind {q(str(mounted))} /tmp/k8s-webhook-server"
            f" && exec {' '.join(q(a) for a in args)}"
        )
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig), "MY_POD_NAMESPACE": OPERATOR_NAMESPACE},
            start_new_session=True,
        )
        log.close()


class MpiOperatorProcess(ManagedProcess):
    """mpi-operator as a child process holding the machine-wide lock for its port :8080."""

    what = "mpi-operator"
    ready_within = 300.0  # a second one waits for the first to end

    def __init__(self, build: UpstreamBuild, kubeconfig: Path, workdir: Path) -> None:
        self.build = build
        self.kubeconfig = kubeconfig
        self.workdir = workdir
        self.health_port = 8080
        self.log_path = workdir / "mpi-operator.log"
        self.process: subprocess.Popen[bytes] | None = None

    async def install_lock_namespace(self, kube: KubeClient) -> None:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "mpi-operator"}}
        try:
            await kube.create(api_path("v1", "namespaces"), namespace)
        except ApiError as err:
            if err.status != 409:
                raise

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        lock = self.build.binary.parent.parent / "port-8080.lock"
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [
                "flock",
                str(lock),
                str(self.build.binary),
                f"--kubeConfig={self.kubeconfig}",
                "--lock-namespace=mpi-operator",
                "--threadiness=2",
                "--kube-api-qps=50",
                "--kube-api-burst=100",
                "-v=2",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def wait_ready(self, within: float | None = None) -> None:
        """Until it leads (its log says so); fails early, with the log's tail, if it exits."""
        within = self.ready_within if within is None else within
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            if not self.alive():
                code = None if self.process is None else self.process.returncode
                raise RuntimeError(f"{self.what} exited ({code}):\n{self.log_tail()}")
            if self.log_path.exists() and "Leading started" in self.log_path.read_text(errors="replace"):
                return
            time.sleep(0.3)
        raise TimeoutError(f"{self.what} was not leading within {within:.0f}s:\n{self.log_tail()}")


class KubeflowOperators:
    """Both operators together: started (the training-operator's Secret and webhooks first, as
    its rotator waits for them), stopped and their logs' tails read as one."""

    what = "the Kubeflow operators"

    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        self.trainer = TrainingOperatorProcess(
            training_operator_build(), kubeconfig, workdir / "training-operator"
        )
        self.mpi = MpiOperatorProcess(mpi_operator_build(), kubeconfig, workdir / "mpi-operator")

    async def start(self, kube: KubeClient) -> list[Obj]:
        """Starts both once their CRDs are installed; returns the webhook configurations registered."""
        for build in (self.trainer.build, self.mpi.build):
            if not build.binary.exists():
                raise FileNotFoundError(
                    f"{build.name} is not built ({build.binary}): run e2e/setup.sh --kubeflow"
                )
        self.trainer.workdir.mkdir(parents=True, exist_ok=True)
        await self.trainer.install_secret(kube)
        await self.mpi.install_lock_namespace(kube)
        hooks = training_operator_webhooks(self.trainer.build, self.trainer.webhook_port, self.trainer.ca_pem)
        for configuration in hooks:
            await kube.apply(configuration_path(configuration), configuration, "dra-quota-e2e")
        try:
            self.trainer.start()
            self.mpi.start()
            await self.trainer.wait_ready_async()
            await self.mpi.wait_ready_async()
        except BaseException:
            self.stop()
            raise
        return hooks

    def stop(self, grace: float = 15.0) -> int | None:
        self.mpi.stop(grace)
        return self.trainer.stop(grace)

    def log_tail(self, lines: int = 40) -> str:
        return (
            f"training-operator log tail:\n{self.trainer.log_tail(lines)}\n"
            f"mpi-operator log tail:\n{self.mpi.log_tail(lines)}"
        )
