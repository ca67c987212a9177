"""JobSet's own manager (built by `e2e/build-binaries.sh --jobset`) run out of cluster on the
test-bed, with its CRD and its admission webhooks.

It runs against the test-bed's kubeconfig with a configuration of its own: no leader election,
no internal cert management, its webhook server on a loopback port serving a certificate for
127.0.0.1, metrics off, health probes on a loopback port. Its webhook configurations (from its
module, with the patches that give its pod webhooks their object selectors, as its kustomize
build applies them) are registered with `url` client configs, so a JobSet is defaulted and
validated at creation as in a real install, and its Jobs' pods are checked by its pod webhooks.

For a scenario that enables the JobSet framework without asking for JobSet's controller, the
manager runs read-only (`read_only_kubeconfig`): the API server answers as a user allowed to get,
list and watch anything and to change nothing, so its controllers make no Job, Service or status
write while its webhooks, which only answer the API server, default and validate every JobSet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from e2e.support.upstream import (
    UpstreamBuild,
    UpstreamProcess,
    enables,
    install_upstream_crds,
    upstream_build,
    upstream_webhooks,
)

__all__ = [
    "JOBSET_FRAMEWORK",
    "JobSetBuild",
    "JobSetProcess",
    "enables_jobset",
    "install_jobset_crds",
    "jobset_build",
    "jobset_webhooks",
    "read_only_access",
    "read_only_kubeconfig",
]

JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
Obj = dict[str, Any]
JobSetBuild = UpstreamBuild
# Who a read-only JobSet manager acts as (impersonated by the admin kubeconfig's user).
READ_ONLY_USER = "jobset-webhooks-only"


def jobset_build(cache: Path | None = None) -> UpstreamBuild:
    return upstream_build("jobset", "JOBSET_VERSION", "jobset", cache)


def jobset_webhooks(build: UpstreamBuild, port: int, ca_pem: bytes) -> list[Obj]:
    """JobSet's webhook configurations, patched, each webhook called at 127.0.0.1:port."""
    return upstream_webhooks(build, port, ca_pem)


class JobSetProcess(UpstreamProcess):
    """JobSet's manager as a child process (its own process group), logging to a file."""

    what = "the JobSet manager"
    config_api = "config.jobset.x-k8s.io/v1alpha1"


def enables_jobset(configuration: Path) -> bool:
    """Whether a Configuration file names the jobset framework in integrations.frameworks."""
    return enables(configuration, JOBSET_FRAMEWORK)


async def install_jobset_crds(kube: Any, build: UpstreamBuild | None = None) -> None:
    """JobSet's CRD from its module (`e2e/build-binaries.sh --jobset`), established."""
    await install_upstream_crds(kube, build or jobset_build(), "JobSet")


def read_only_access(user: str = READ_ONLY_USER) -> list[Obj]:
    """A ClusterRole allowing get, list and watch of every resource, bound to `user`."""
    name = f"{user}-read-only"
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list", "watch"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }
    return [role, binding]


def read_only_kubeconfig(kubeconfig: Path, out: Path, user: str = READ_ONLY_USER) -> Path:
    """A copy of `kubeconfig` whose users impersonate `user` (client-go's `as`): with
    `read_only_access` bound, every write it makes is refused."""
    config = yaml.safe_load(kubeconfig.read_text())
    for entry in config["users"]:
        entry["user"] = {**entry["user"], "as": user}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    out.chmod(0o600)
    return out
