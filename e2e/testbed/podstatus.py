"""Pure helpers for the pod simulator: what a kubelet would write, and its claim rule."""

from __future__ import annotations

import hashlib
import math
from typing import Any

from e2e.testbed.kubeclient import Obj
from e2e.testbed.names import FAIL_ANNOTATION, RUN_SECONDS_ANNOTATION, STALL_ANNOTATION
from e2e.testbed.timeutil import rfc3339

TERMINAL_PHASES = ("Succeeded", "Failed")
# The kubelet's Event reason when NodePrepareResources fails (and our condition reason).
PREPARE_FAILED_REASON = "FailedPrepareDynamicResources"


def pod_annotations(pod: Obj) -> dict[str, str]:
    result: dict[str, str] = pod.get("metadata", {}).get("annotations") or {}
    return result


def _truthy(value: str | None) -> bool:
    return value is not None and value.strip().lower() in ("true", "1", "yes")


def wants_stall(pod: Obj) -> bool:
    return _truthy(pod_annotations(pod).get(STALL_ANNOTATION))


def wants_failure(pod: Obj) -> bool:
    return _truthy(pod_annotations(pod).get(FAIL_ANNOTATION))


def run_seconds(pod: Obj, default: float) -> float:
    """How long the pod runs; ``math.inf`` for "forever". Bad values fall back to default."""
    raw = pod_annotations(pod).get(RUN_SECONDS_ANNOTATION)
    if raw is None:
        return default
    if raw.strip().lower() in ("forever", "inf", "infinity", "never"):
        return math.inf
    try:
        value = float(raw)
    except ValueError:
        return default
    return value if value >= 0 and math.isfinite(value) else default


def claim_names(pod: Obj) -> tuple[list[str], str | None]:
    """Names of the ResourceClaims the pod uses, or (partial, reason) while one is unknown."""
    spec_claims: list[Obj] = pod.get("spec", {}).get("resourceClaims") or []
    statuses = {s.get("name"): s for s in pod.get("status", {}).get("resourceClaimStatuses") or []}
    names: list[str] = []
    for claim in spec_claims:
        if claim.get("resourceClaimName"):
            names.append(claim["resourceClaimName"])
            continue
        status = statuses.get(claim.get("name"))
        if status is None:
            return names, f"claim for {claim.get('name')!r} not created yet"
        if status.get("resourceClaimName"):
            names.append(status["resourceClaimName"])
        # No name in the status: the template decided no claim is needed.
    return names, None


def claims_blocking(pod: Obj, claims: dict[str, Obj]) -> str | None:
    """Why the pod may not start yet (kubelet's rule), or None if every claim is ready.

    ``claims`` maps "namespace/name" to ResourceClaim objects. A claim must be
    allocated and list this pod in status.reservedFor.
    """
    names, pending = claim_names(pod)
    if pending is not None:
        return pending
    meta = pod["metadata"]
    for name in names:
        claim = claims.get(f"{meta['namespace']}/{name}")
        if claim is None:
            return f"ResourceClaim {name} not found"
        status: dict[str, Any] = claim.get("status") or {}
        if not status.get("allocation"):
            return f"ResourceClaim {name} not allocated"
        reserved = status.get("reservedFor") or []
        if not any(r.get("resource") == "pods" and r.get("uid") == meta["uid"] for r in reserved):
            return f"ResourceClaim {name} not reserved for the pod"
    return None


def pod_claims(pod: Obj, claims: dict[str, Obj]) -> list[Obj]:
    """The ResourceClaim objects the pod uses that are in ``claims`` ("namespace/name" keys)."""
    names, _ = claim_names(pod)
    namespace = pod["metadata"]["namespace"]
    return [claims[f"{namespace}/{n}"] for n in names if f"{namespace}/{n}" in claims]


def _container_id(pod: Obj, name: str) -> str:
    digest = hashlib.sha256(f"{pod['metadata']['uid']}/{name}".encode()).hexdigest()
    return f"containerd://{digest}"


def _image_id(image: str) -> str:
    repo = image.split("@")[0]
    head, sep, tag = repo.rpartition(":")
    if sep and "/" not in tag:
        repo = head
    return f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}"


def _condition(
    kind: str, status: bool, at: str, reason: str | None = None, message: str | None = None
) -> Obj:
    # Explicit nulls clear a reason/message left by an earlier patch (strategic
    # merge merges conditions by type).
    return {
        "type": kind,
        "status": "True" if status else "False",
        "lastProbeTime": None,
        "lastTransitionTime": at,
        "reason": reason or None,
        "message": message or None,
    }


def _container_status(
    pod: Obj,
    container: Obj,
    state: Obj,
    ready: bool,
    started: bool,
) -> Obj:
    # Explicit nulls remove the previous state keys under a strategic merge patch.
    full_state: Obj = {"waiting": None, "running": None, "terminated": None, **state}
    return {
        "name": container["name"],
        "image": container.get("image", ""),
        "imageID": _image_id(container.get("image", "")) if started or "terminated" in state else "",
        "containerID": _container_id(pod, container["name"]) if "waiting" not in state else None,
        "ready": ready,
        "started": started,
        "restartCount": 0,
        "state": full_state,
    }


def _init_statuses(pod: Obj, at: str) -> list[Obj]:
    result = []
    for container in pod.get("spec", {}).get("initContainers") or []:
        if container.get("restartPolicy") == "Always":  # sidecar
            state: Obj = {"running": {"startedAt": at}}
            result.append(_container_status(pod, container, state, True, True))
        else:
            state = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": at, "finishedAt": at}}
            result.append(_container_status(pod, container, state, False, False))
    return result


def _addresses(host_ip: str, pod_ip: str) -> Obj:
    return {"hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": pod_ip, "podIPs": [{"ip": pod_ip}]}


def running_patch(pod: Obj, host_ip: str, pod_ip: str) -> Obj:
    """Status patch: containers started and Ready."""
    at = rfc3339()
    containers = pod["spec"]["containers"]
    return {
        "status": {
            "phase": "Running",
            "startTime": at,
            **_addresses(host_ip, pod_ip),
            "conditions": [
                _condition("PodReadyToStartContainers", True, at),
                _condition("Initialized", True, at),
                _condition("ContainersReady", True, at),
                _condition("Ready", True, at),
            ],
            "initContainerStatuses": _init_statuses(pod, at) or None,
            "containerStatuses": [
                _container_status(pod, c, {"running": {"startedAt": at}}, True, True) for c in containers
            ],
        }
    }


def stalled_patch(pod: Obj, host_ip: str, pod_ip: str) -> Obj:
    """Status patch for a pod that never gets going: Pending, containers still being created."""
    at = rfc3339()
    waiting = {"waiting": {"reason": "ContainerCreating"}}
    return {
        "status": {
            "phase": "Pending",
            "startTime": at,
            **_addresses(host_ip, pod_ip),
            "conditions": [
                _condition("PodReadyToStartContainers", True, at),
                _condition("Initialized", True, at),
                _condition("ContainersReady", False, at, "ContainersNotReady"),
                _condition("Ready", False, at, "ContainersNotReady"),
            ],
            "containerStatuses": [
                _container_status(pod, c, waiting, False, False) for c in pod["spec"]["containers"]
            ],
        }
    }


def prepare_failed_patch(pod: Obj, host_ip: str, message: str) -> Obj:
    """Status patch for a pod whose NodePrepareResources failed: what a kubelet leaves
    (Pending, no sandbox so no pod IP, containers waiting in ContainerCreating), plus
    the error in the PodReadyToStartContainers condition and the waiting message, so
    ``kubectl get pod -o yaml`` / ``kubectl describe pod`` show why."""
    at = rfc3339()
    names = [c["name"] for c in pod["spec"]["containers"]]
    unready = f"containers with unready status: [{' '.join(names)}]"
    waiting = {"waiting": {"reason": "ContainerCreating", "message": message}}
    status: Obj = {
        "phase": "Pending",
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "conditions": [
            _condition("PodReadyToStartContainers", False, at, PREPARE_FAILED_REASON, message),
            _condition("Initialized", True, at),
            _condition("ContainersReady", False, at, "ContainersNotReady", unready),
            _condition("Ready", False, at, "ContainersNotReady", unready),
        ],
        "containerStatuses": [
            _container_status(pod, c, waiting, False, False) for c in pod["spec"]["containers"]
        ],
    }
    if not pod.get("status", {}).get("startTime"):
        status["startTime"] = at
    return {"status": status}


def finished_patch(pod: Obj, exit_code: int, reason: str | None = None) -> Obj:
    """Status patch: every container terminated, phase Succeeded (exit 0) or Failed."""
    at = rfc3339()
    succeeded = exit_code == 0
    started_at = pod.get("status", {}).get("startTime") or at
    term_reason = reason or ("Completed" if succeeded else "Error")
    pod_reason = "PodCompleted" if succeeded else "PodFailed"
    terminated = {
        "terminated": {
            "exitCode": exit_code,
            "reason": term_reason,
            "startedAt": started_at,
            "finishedAt": at,
            "containerID": None,
        }
    }
    statuses = []
    for c in pod["spec"]["containers"]:
        status = _container_status(pod, c, terminated, False, False)
        status["state"]["terminated"]["containerID"] = status["containerID"]
        statuses.append(status)
    return {
        "status": {
            "phase": "Succeeded" if succeeded else "Failed",
            "conditions": [
                _condition("PodReadyToStartContainers", False, at),
                _condition("ContainersReady", False, at, pod_reason),
                _condition("Ready", False, at, pod_reason),
            ],
            "containerStatuses": statuses,
        }
    }
