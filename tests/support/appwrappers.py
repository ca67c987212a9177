"""AppWrapper bodies for the tests: an AppWrapper wrapping a batch/v1 Job whose pods each ask a
GPU from a ResourceClaimTemplate, as the AppWrapper controller's users write them."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api.appwrapper import AppWrapper

__all__ = ["appwrapper_body", "appwrapper_of", "wrapped_job"]


def wrapped_job(
    name: str, *, parallelism: int = 1, completions: int | None = None, claim: str = "gpu-a"
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "c",
        "image": "busybox:1.36",
        "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpu"}]},
    }
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "containers": [container],
                "restartPolicy": "Never",
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": claim}],
            },
        },
    }
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def appwrapper_body(
    name: str,
    components: list[dict[str, Any]] | None = None,
    *,
    queue: str | None = "lq",
    suspend: bool = True,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": {}}
    if queue is not None:
        meta["labels"]["kueue.x-k8s.io/queue-name"] = queue
    if components is None:
        components = [{"template": wrapped_job(f"{name}-job", parallelism=2)}]
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": meta,
        "spec": {"suspend": suspend, "components": components},
    }


def appwrapper_of(body: dict[str, Any]) -> AppWrapper:
    decoded: AppWrapper = msgspec.json.decode(msgspec.json.encode(body), type=AppWrapper)
    return decoded
