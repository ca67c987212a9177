"""Benchmark: the admission webhook server's answer time over HTTPS on 127.0.0.1.

Sends AdmissionReviews for a queue-labelled Job (mutating: suspend) and for a Workload with one
pod set (validating) over one kept-alive TLS connection, one at a time, as the API server does
per request; prints p50, p99 and max in milliseconds. Asserts nothing.
Run: .venv/bin/python bench/webhook_latency.py [-n 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import ssl
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from reconciler.admission.queue_rules import JobPolicy
from reconciler.api import ObjectMeta
from reconciler.webhook.certmanager import write_cert_dir
from reconciler.webhook.certs import new_bundle
from reconciler.webhook.server import WebhookServer, make_app

CONTAINER = {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}
TEMPLATE = {"spec": {"restartPolicy": "Never", "containers": [CONTAINER]}}
JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j", "namespace": "ns", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
    "spec": {"suspend": False, "template": TEMPLATE},
}
WORKLOAD = {
    "apiVersion": "kueue.x-k8s.io/v1beta2",
    "kind": "Workload",
    "metadata": {"name": "w", "namespace": "ns"},
    "spec": {"queueName": "lq", "podSets": [{"name": "main", "count": 4, "template": TEMPLATE}]},
}
CASES: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "Job (mutate)": ("/mutate-batch-v1-job", "batch", "jobs", JOB),
    "Workload (validate)": (
        "/validate-kueue-x-k8s-io-v1beta2-workload",
        "kueue.x-k8s.io",
        "workloads",
        WORKLOAD,
    ),
}


class NoLookups:
    async def default_local_queue_exists(self, namespace: str) -> bool:
        return False

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        return {}

    async def object_meta(self, api_version: str, kind: str, namespace: str, name: str) -> ObjectMeta | None:
        return None

    async def workload_admitted(self, namespace: str, name: str) -> bool:
        return False


async def main(count: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        bundle = new_bundle(["127.0.0.1"], dt.datetime.now(dt.UTC))
        write_cert_dir(Path(directory), bundle)
        server = WebhookServer(make_app(JobPolicy(), NoLookups()), "127.0.0.1", 0, Path(directory))
        task = asyncio.get_running_loop().create_task(server.run())
        await server.serving.wait()
        context = ssl.create_default_context(cadata=bundle.ca.cert_pem.decode())
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=context, limit=1)) as session:
            for label, (path, group, resource, obj) in CASES.items():
                url = f"https://127.0.0.1:{server.bound_port}{path}"
                request = {
                    "uid": "u",
                    "resource": {"group": group, "resource": resource},
                    "operation": "CREATE",
                }
                body = {
                    "apiVersion": "admission.k8s.io/v1",
                    "kind": "AdmissionReview",
                    "request": {**request, "object": obj},
                }
                times = []
                for _ in range(count):
                    began = time.perf_counter()
                    async with session.post(url, json=body) as resp:
                        await resp.read()
                    times.append((time.perf_counter() - began) * 1000)
                times.sort()
                p99 = times[int(len(times) * 0.99) - 1]
                print(
                    f"{label:22} n={count}  p50 {statistics.median(times):.2f} ms  "
                    f"p99 {p99:.2f} ms  max {times[-1]:.2f} ms"
                )
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2000, help="reviews per case (default 2000)")
    asyncio.run(main(parser.parse_args().n))
