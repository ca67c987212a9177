"""The interface the runtime is written against: names and parameters must not drift."""

from __future__ import annotations

import dataclasses
import inspect

import reconciler.api as api
import reconciler.kube as kube
from reconciler.kube import errors

PROMISED = {
    "KubeClient", "Informer", "WatchEvent", "InformerStats", "Backoff",
    "KubeError", "TransportError", "ApiError", "NotFound", "Conflict", "Gone", "Invalid",
    "TooManyRequests", "ServerError", "DecodeError",
}  # fmt: skip
# The resources (kinds and paths) live in the floor below kube and core.
PROMISED_RESOURCES = {
    "Resource", "JOBS", "PODS", "NAMESPACES", "EVENTS", "LEASES",
    "RESOURCE_CLAIMS", "RESOURCE_CLAIM_TEMPLATES",
    "DEVICE_CLASSES", "RESOURCE_SLICES", "WORKLOADS", "CLUSTER_QUEUES", "LOCAL_QUEUES", "RESOURCE_FLAVORS",
}  # fmt: skip


def _params(func: object) -> list[str]:
    return [p for p in inspect.signature(func).parameters if p != "self"]  # type: ignore[arg-type]


def test_exports() -> None:
    assert set(kube.__all__) >= PROMISED
    assert all(hasattr(kube, name) for name in kube.__all__)
    assert set(api.__all__) >= PROMISED_RESOURCES
    assert all(hasattr(api, name) for name in api.__all__)


def test_error_tree() -> None:
    for name in ("NotFound", "Conflict", "Gone", "Invalid", "TooManyRequests", "ServerError"):
        assert issubclass(getattr(errors, name), errors.ApiError)
    for name in ("TransportError", "ApiError", "DecodeError"):
        assert issubclass(getattr(errors, name), errors.KubeError)
    assert errors.TooManyRequests(429, "", "", 1.5).retry_after == 1.5


def test_client_signatures() -> None:
    c = kube.KubeClient
    assert _params(c.__init__)[:4] == ["server", "ssl", "token", "session"]
    assert _params(c.from_kubeconfig) == ["path", "context", "kwargs"]
    assert _params(c.request) == ["method", "path", "params", "body", "content_type", "timeout"]
    assert _params(c.get) == ["path", "params"]
    assert _params(c.create) == ["resource", "namespace", "body"]
    assert _params(c.merge_patch) == ["resource", "namespace", "name", "patch", "subresource"]
    assert _params(c.json_patch) == ["resource", "namespace", "name", "patch", "subresource"]
    assert _params(c.delete) == ["resource", "namespace", "name", "propagation"]
    assert _params(c.stream_lines) == ["path", "params", "connect_timeout", "read_timeout", "on_open"]


def test_informer_signature() -> None:
    assert _params(kube.Informer.__init__) == [
        "client", "resource", "decode_type", "sink", "namespace", "label_selector", "field_selector",
        "page_size", "watch_timeout", "inactivity_timeout", "backoff", "optional",
    ]  # fmt: skip
    assert [f.name for f in dataclasses.fields(kube.WatchEvent)] == ["kind", "resource", "key", "obj"]
    assert [f.name for f in dataclasses.fields(api.Resource)] == [
        "group",
        "version",
        "plural",
        "kind",
        "namespaced",
    ]
    assert [f.name for f in dataclasses.fields(kube.Backoff)] == ["initial", "maximum", "factor", "jitter"]
