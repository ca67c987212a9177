"""LeaderWorkerSet's own manager (built by `e2e/build-binaries.sh --lws`) run out of cluster on
the test-bed, with its CRD and its admission webhooks.

It runs against the test-bed's kubeconfig with a configuration of its own
(config.lws.x-k8s.io/v1alpha1): no leader election, no internal cert management (its
cert rotator would want a Secret and a Service), its webhook server on a loopback port serving a
certificate for 127.0.0.1, metrics off, health probes on a loopback port. Its webhook
configurations (from its module, with the patches that give its pod webhooks their object
selector, as its kustomize build applies them) are registered with `url` client configs: its
set webhooks default and validate a LeaderWorkerSet at creation, and its pod webhook labels each
leader pod with its group's index and each worker with its own (the LWS controller's pod
reconciler and this controller's grouping read them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.support.upstream import (
    UpstreamBuild,
    UpstreamProcess,
    enables,
    install_upstream_crds,
    upstream_build,
    upstream_webhooks,
)

__all__ = [
    "LWS_API",
    "LWS_FRAMEWORK",
    "LwsBuild",
    "LwsProcess",
    "enables_lws",
    "install_lws_crds",
    "lws_build",
    "lws_webhooks",
]

LWS_API = "leaderworkerset.x-k8s.io/v1"
LWS_FRAMEWORK = "leaderworkerset.x-k8s.io/leaderworkerset"
Obj = dict[str, Any]
LwsBuild = UpstreamBuild


def lws_build(cache: Path | None = None) -> UpstreamBuild:
    return upstream_build("lws", "LWS_VERSION", "lws", cache)


def lws_webhooks(build: UpstreamBuild, port: int, ca_pem: bytes) -> list[Obj]:
    """LeaderWorkerSet's webhook configurations, patched, each webhook called at 127.0.0.1:port."""
    return upstream_webhooks(build, port, ca_pem)


class LwsProcess(UpstreamProcess):
    """LeaderWorkerSet's manager as a child process (its own process group), logging to a file."""

    what = "the LeaderWorkerSet manager"
    config_api = "config.lws.x-k8s.io/v1alpha1"


def enables_lws(configuration: Path) -> bool:
    """Whether a Configuration file names the lws framework in integrations.frameworks."""
    return enables(configuration, LWS_FRAMEWORK)


async def install_lws_crds(kube: Any, build: UpstreamBuild | None = None) -> None:
    """LeaderWorkerSet's CRD from its module (`e2e/build-binaries.sh --lws`), established."""
    await install_upstream_crds(kube, build or lws_build(), "LeaderWorkerSet")
