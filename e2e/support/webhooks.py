"""The admission webhooks on the test-bed: the shipped configurations (manifests/webhook.yaml)
pointed at a controller on loopback, certificates for 127.0.0.1, and waits on the API server
really calling the webhook.

The test-bed has no cluster network: kube-apiserver cannot reach a Service, so each webhook's
``clientConfig.service`` becomes ``clientConfig.url: https://127.0.0.1:<port><path>`` (Kubernetes
allows URL client configs), with the CA bundle that signed the server's certificate.
"""

from __future__ import annotations

import base64
import copy
import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from e2e.support.deploy import ROOT
from e2e.testbed import KubeClient, api_path
from e2e.testbed.kubeclient import ApiError
from e2e.testbed.scenario import wait_for
from reconciler.webhook.certmanager import write_cert_dir
from reconciler.webhook.certs import CertBundle, new_bundle

__all__ = [
    "ADMISSION",
    "QUEUE_LABEL",
    "configuration_path",
    "conversion_on_loopback",
    "loopback_certificate",
    "on_loopback",
    "queue_job",
    "register",
    "scoped",
    "shipped_configurations",
    "unregister",
    "upstream_on_loopback",
    "wait_until_jobs_are_suspended",
]

ADMISSION = "admissionregistration.k8s.io/v1"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
FIELD_MANAGER = "dra-quota-e2e"
Obj = dict[str, Any]
_PLURALS = {
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
}


def shipped_configurations() -> list[Obj]:
    """The MutatingWebhookConfiguration and ValidatingWebhookConfiguration as shipped."""
    docs = yaml.safe_load_all((ROOT / "manifests" / "webhook.yaml").read_text())
    return [d for d in docs if isinstance(d, dict) and d["kind"] in _PLURALS]


def on_loopback(configurations: Iterable[Obj], port: int, ca_pem: bytes | None) -> list[Obj]:
    """Each webhook called at https://127.0.0.1:<port><its path>, trusting ``ca_pem`` (None: no bundle)."""
    out = []
    for configuration in configurations:
        configuration = copy.deepcopy(configuration)
        for webhook in configuration["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}"}
            if ca_pem is not None:
                webhook["clientConfig"]["caBundle"] = base64.b64encode(ca_pem).decode()
        out.append(configuration)
    return out


def _kustomize_replaced(doc: Obj, patch_file: Path) -> Obj:
    """A webhook configuration with a kustomize JSON patch applied: only `replace` of a whole
    webhook, which is all the patches JobSet and LeaderWorkerSet ship do."""
    out = copy.deepcopy(doc)
    for op in yaml.safe_load(patch_file.read_text()):
        parts = op["path"].strip("/").split("/")
        if op["op"] != "replace" or len(parts) != 2 or parts[0] != "webhooks":
            raise ValueError(f"{patch_file}: unexpected patch {op}")
        out["webhooks"][int(parts[1])] = op["value"]
    return out


def upstream_on_loopback(
    documents: Iterable[Obj], patches: dict[str, Path], port: int, ca_pem: bytes, prefix: str
) -> list[Obj]:
    """An upstream manager's webhook configurations (its controller-gen manifests, each kind
    patched by ``patches[kind]`` as its kustomize build does), each webhook called at
    127.0.0.1:port trusting ``ca_pem``, renamed ``<prefix>-<name>``."""
    out = []
    for doc in documents:
        patched = _kustomize_replaced(doc, patches[doc["kind"]])
        out += on_loopback([patched], port, ca_pem)
        out[-1]["metadata"] = {"name": f"{prefix}-{doc['metadata']['name']}"}
    return out


def scoped(configurations: Iterable[Obj], base: str, namespace: str, label: tuple[str, str]) -> list[Obj]:
    """Renamed ``<base>-mutating|validating-webhook-configuration`` and confined to what a test makes:
    namespaced objects of ``namespace``, cluster-scoped ones carrying ``label``."""
    out = []
    for configuration in configurations:
        configuration = copy.deepcopy(configuration)
        word = "mutating" if configuration["kind"].startswith("Mutating") else "validating"
        configuration["metadata"] = {"name": f"{base}-{word}-webhook-configuration"}
        for webhook in configuration["webhooks"]:
            webhook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
            if webhook["rules"][0]["resources"][0] in ("clusterqueues", "resourceflavors"):
                del webhook["namespaceSelector"]
                webhook["objectSelector"] = {"matchLabels": {label[0]: label[1]}}
        out.append(configuration)
    return out


def configuration_path(configuration: Obj) -> str:
    return api_path(ADMISSION, _PLURALS[configuration["kind"]], name=configuration["metadata"]["name"])


async def register(kube: KubeClient, configurations: Iterable[Obj]) -> list[Obj]:
    return [await kube.apply(configuration_path(c), c, FIELD_MANAGER) for c in configurations]


async def unregister(kube: KubeClient, configurations: Iterable[Obj]) -> None:
    for configuration in configurations:
        try:
            await kube.delete(configuration_path(configuration))
        except ApiError as err:
            if err.status != 404:
                raise


async def conversion_on_loopback(kube: KubeClient, crds: Iterable[str], port: int, ca_pem: bytes) -> None:
    """The conversion webhook of each named CRD called at https://127.0.0.1:<port>/convert, trusting
    ``ca_pem`` (a shipped CRD's ``service`` replaced; one without a conversion webhook given one)."""
    config = {
        "service": None,
        "url": f"https://127.0.0.1:{port}/convert",
        "caBundle": base64.b64encode(ca_pem).decode(),
    }
    webhook = {"conversionReviewVersions": ["v1"], "clientConfig": config}
    patch = {"spec": {"conversion": {"strategy": "Webhook", "webhook": webhook}}}
    for name in crds:
        await kube.patch(api_path("apiextensions.k8s.io/v1", "customresourcedefinitions", name=name), patch)


def loopback_certificate(cert_dir: Path) -> CertBundle:
    """A CA and a serving certificate for 127.0.0.1, written as tls.crt, tls.key and ca.crt
    (what cert-manager would mount)."""
    bundle = new_bundle(["127.0.0.1"], dt.datetime.now(dt.UTC))
    write_cert_dir(cert_dir, bundle)
    return bundle


def queue_job(
    name: str, namespace: str, queue: str | None = "lq", *, suspend: bool = False, run_seconds: str = "2"
) -> Obj:
    """A one-pod Job without devices (``suspend`` as given), naming ``queue`` when given; its
    simulated pod runs ``run_seconds`` (``forever`` never ends)."""
    labels = {QUEUE_LABEL: queue} if queue else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "suspend": suspend,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {"testbed.dra-quota.dev/run-seconds": run_seconds}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
                    ],
                },
            },
        },
    }


async def wait_until_jobs_are_suspended(kube: KubeClient, namespace: str, within: float = 60.0) -> None:
    """Until the API server calls the Job webhook and gets its answer: a dry-run create of a
    queue-labelled, unsuspended Job comes back suspended."""

    async def suspended() -> bool:
        job = queue_job("webhook-probe", namespace)
        created = await kube.request(
            "POST", api_path("batch/v1", "jobs", namespace), params={"dryRun": "All"}, body=job
        )
        return bool(created["spec"].get("suspend"))

    await wait_for(f"the Job webhook to suspend Jobs in {namespace}", suspended, within=within, interval=0.5)
