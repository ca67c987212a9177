"""The webhook server over real HTTPS on 127.0.0.1: AdmissionReview in and out, waiting for its
certificate, and a new certificate loaded without a restart."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from typing import Any

import aiohttp
import pytest

from reconciler.webhook.certmanager import write_cert_dir
from reconciler.webhook.certs import new_bundle
from tests.support.webhook_server import NOW, Running, job_request, serving


def patch_of(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops


@pytest.mark.asyncio
async def test_it_waits_for_its_certificate_then_serves(running: Running) -> None:
    await asyncio.sleep(0.2)
    assert running.server.not_serving_reason() == (
        f"webhook server waiting for tls.crt and tls.key in {running.cert_dir}"
    )
    await serving(running)
    assert running.server.not_serving_reason() is None


@pytest.mark.asyncio
async def test_a_queue_labelled_job_is_suspended_over_https(running: Running) -> None:
    bundle = await serving(running)
    request = job_request(**{"kueue.x-k8s.io/queue-name": "lq"})
    response = await running.review("/mutate-batch-v1-job", bundle, request)
    assert response["allowed"] is True
    assert patch_of(response) == [{"op": "add", "path": "/spec/suspend", "value": True}]
    # A Job of nobody's queue passes unchanged, once the namespace was asked for a default LocalQueue.
    response = await running.review("/mutate-batch-v1-job", bundle, job_request())
    assert response == {"uid": "u-1", "allowed": True}
    assert running.lookups.asked == ["team-a"]


@pytest.mark.asyncio
async def test_a_default_local_queue_that_cannot_be_looked_up_refuses_the_job(running: Running) -> None:
    bundle = await serving(running)
    running.lookups.broken = True
    response = await running.review("/mutate-batch-v1-job", bundle, job_request())
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert response["status"]["message"] == (
        "cannot tell whether namespace team-a has a default LocalQueue: "
        "no answer from the API server within 3s"
    )


@pytest.mark.asyncio
async def test_a_bad_cluster_queue_is_denied_with_the_field_named(running: Running) -> None:
    bundle = await serving(running)
    cq = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "cq"},
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
    request = {
        "uid": "u-2",
        "resource": {"group": "kueue.x-k8s.io", "version": "v1beta2", "resource": "clusterqueues"},
        "operation": "CREATE",
        "name": "cq",
        "object": cq,
    }
    response = await running.review("/validate-kueue-x-k8s-io-v1beta2-clusterqueue", bundle, request)
    field = "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
    assert response["allowed"] is False
    assert response["status"] == {
        "metadata": {},
        "status": "Failure",
        "code": 403,
        "reason": "Forbidden",
        "message": f'{field}: Invalid value: "-1": must be greater than or equal to 0',
        "details": {
            "causes": [
                {
                    "reason": "FieldValueInvalid",
                    "message": 'Invalid value: "-1": must be greater than or equal to 0',
                    "field": field,
                }
            ]
        },
    }


@pytest.mark.asyncio
async def test_a_review_of_another_kind_or_version_is_refused(running: Running) -> None:
    bundle = await serving(running)
    request = {**job_request(), "resource": {"group": "", "version": "v1", "resource": "pods"}}
    response = await running.review("/mutate-batch-v1-job", bundle, request)
    assert response["allowed"] is False
    assert response["status"]["message"] == "/mutate-batch-v1-job serves batch/jobs, not /pods"
    url = f"https://127.0.0.1:{running.server.bound_port}/mutate-batch-v1-job"
    connector = aiohttp.TCPConnector(ssl=running.client_context(bundle))
    async with aiohttp.ClientSession(connector=connector) as session:
        old = {"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": job_request()}
        async with session.post(url, json=old) as resp:
            assert resp.status == 400
            assert "admissionReviewVersions: [v1]" in await resp.text()


@pytest.mark.asyncio
async def test_a_new_certificate_is_loaded_without_a_restart(running: Running) -> None:
    first = await serving(running)
    request = job_request(**{"kueue.x-k8s.io/queue-name": "lq"})
    assert (await running.review("/mutate-batch-v1-job", first, request))["allowed"] is True
    # Half a pair (a new key with the old certificate) is never loaded: the old pair keeps serving.
    second = new_bundle(["127.0.0.1"], NOW)
    (running.cert_dir / "tls.key").write_bytes(second.serving.key_pem)
    await asyncio.sleep(0.3)
    assert (await running.review("/mutate-batch-v1-job", first, request))["allowed"] is True
    # The whole new pair is: a client trusting only the new CA gets through, one trusting the old does not.
    write_cert_dir(running.cert_dir, second)
    for _ in range(100):
        try:
            await running.review("/mutate-batch-v1-job", second, request)
            break
        except aiohttp.ClientConnectorCertificateError:
            await asyncio.sleep(0.05)
    assert (await running.review("/mutate-batch-v1-job", second, request))["allowed"] is True
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await running.review("/mutate-batch-v1-job", first, request)


@pytest.mark.asyncio
async def test_handshakes_during_certificate_reloads_all_succeed(running: Running) -> None:
    """A reload never leaves a handshake with one pair's certificate and the other's key (seen in
    CI as a connection reset while a rotated pair was being loaded into the serving context)."""
    first = await serving(running)
    second = new_bundle(["127.0.0.1"], NOW)
    trusting_both = ssl.create_default_context(
        cadata=first.ca.cert_pem.decode() + second.ca.cert_pem.decode()
    )
    port = running.server.bound_port
    failures: list[BaseException] = []

    async def handshakes() -> None:
        for _ in range(150):
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trusting_both)
                writer.close()
                await writer.wait_closed()
            except (OSError, ssl.SSLError) as err:
                failures.append(err)

    async def rotations() -> None:
        for turn in range(60):
            await asyncio.to_thread(write_cert_dir, running.cert_dir, second if turn % 2 == 0 else first)
            await running.server.reload()

    await asyncio.gather(handshakes(), handshakes(), rotations())
    assert not failures, f"{len(failures)} handshakes failed during reloads, e.g. {failures[0]!r}"


@pytest.mark.asyncio
async def test_a_conversion_review_is_answered_on_convert(running: Running) -> None:
    bundle = await serving(running)
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "gpu"}}
    cq["spec"] = {"cohort": "research", "admissionChecks": ["prov"]}
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "c1", "desiredAPIVersion": "kueue.x-k8s.io/v1beta2", "objects": [cq]},
    }
    connector = aiohttp.TCPConnector(ssl=running.client_context(bundle))
    url = f"https://127.0.0.1:{running.server.bound_port}/convert"
    async with aiohttp.ClientSession(connector=connector) as session, session.post(url, json=body) as resp:
        assert resp.status == 200
        response = (await resp.json())["response"]
    assert response["uid"] == "c1"
    assert response["result"] == {"status": "Success"}
    assert response["convertedObjects"][0]["spec"] == {
        "cohortName": "research",
        "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]},
    }
