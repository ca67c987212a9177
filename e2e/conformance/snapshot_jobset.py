"""The part of a checkpoint for scenarios where JobSet's manager runs: every scenario whose
Configuration enables the jobset framework (its webhooks; its controller too with
`jobsetController: true` or `trainerController: true`).

On top of snapshot.py's state (unchanged, so the other recordings keep their inputs hash), each
JobSet as both sides' mutating webhooks (Kueue's or the controller's, and JobSet's own) stored it
and as the manager under test changed it since: its suspend flag and managedBy, its
`kueue.x-k8s.io/` labels and annotations, JobSet's defaulted policies and network, and per
replicated job the completion mode, pod restart policy, `kueue.x-k8s.io/` pod labels and
annotations, node selector and tolerations; the `kueue.x-k8s.io/workload` annotation is a field of
its own (`workloadAnnotation`, the Workload's name made `<workload of JobSet/NAME>`): Kueue writes
it for topology-aware scheduling, which the controller does not do (a listed difference that must
not hide the other annotations). And the
pods of a JobSet's Jobs are named `<job>-<completion index>-<5 random characters>`, which
snapshot.py's pod-name pattern (`<job>-<5 random characters>`) does not cover, so the Job
controller's `Created pod: ...` Events would differ between any two runs. Here such a name becomes
`<pod of JOB>` in every Event.
"""

from __future__ import annotations

import re
from typing import Any

from e2e.conformance.snapshot import KUEUE, take_snapshot
from e2e.testbed import KubeClient, api_path

Obj = dict[str, Any]
JOBSET = "jobset.x-k8s.io/v1alpha2"
# Kueue names the started job's Workload on its pod templates (for topology-aware scheduling).
WORKLOAD_ANNOTATION = "kueue.x-k8s.io/workload"
_JOB_KEY = re.compile(r"^Job\[[^/\]]+/([^\]]+)\]\.")


def indexed_pods_named(flat: dict[str, Any]) -> dict[str, Any]:
    """`flat` with `<job>-<index>-<random>` pod names in its Events made `<pod of JOB>`."""
    jobs = sorted({m.group(1) for key in flat if (m := _JOB_KEY.match(key))}, key=len, reverse=True)
    patterns = [(re.compile(rf"\b{re.escape(job)}-\d+-[a-z0-9]{{5}}\b"), f"<pod of {job}>") for job in jobs]

    def named(text: str) -> str:
        for pattern, stable in patterns:
            text = pattern.sub(stable, text)
        return text

    if "Events" in flat:
        flat = {**flat, "Events": sorted({named(e) for e in flat["Events"]})}
    return flat


def workload_owner(wl: Obj) -> str:
    """`KIND/NAME` of a Workload's first owner (snapshot.py's stable name), else `Workload/NAME`."""
    refs = wl["metadata"].get("ownerReferences") or []
    return f"{refs[0]['kind']}/{refs[0]['name']}" if refs else f"Workload/{wl['metadata']['name']}"


def _kueue_keys(mapping: dict[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (mapping or {}).items() if k.startswith("kueue.x-k8s.io/")}


def jobset_fields(jobset: Obj, workloads: dict[str, str] | None = None) -> dict[str, Any]:
    """What a JobSet's mutating webhooks and the manager under test decide, flat; a Workload's
    (hashed) name in a pod annotation becomes its stable name from `workloads`."""
    stable = workloads or {}
    meta, spec = jobset["metadata"], jobset["spec"]
    out: dict[str, Any] = {
        "suspend": spec.get("suspend", False),
        "managedBy": spec.get("managedBy"),
        "labels": _kueue_keys(meta.get("labels")),
        "annotations": _kueue_keys(meta.get("annotations")),
        "successPolicy": spec.get("successPolicy"),
        "startupPolicy": spec.get("startupPolicy"),
        "failurePolicy": spec.get("failurePolicy"),
        "network": spec.get("network"),
    }
    for replicated in spec.get("replicatedJobs") or []:
        job = replicated["template"]["spec"]
        template = job["template"]
        pod = template.get("spec") or {}
        annotations = _kueue_keys((template.get("metadata") or {}).get("annotations"))
        workload = annotations.get(WORKLOAD_ANNOTATION)
        fields = {
            "completionMode": job.get("completionMode"),
            "restartPolicy": pod.get("restartPolicy"),
            "podLabels": _kueue_keys((template.get("metadata") or {}).get("labels")),
            "podAnnotations": {k: v for k, v in annotations.items() if k != WORKLOAD_ANNOTATION},
            "workloadAnnotation": stable.get(workload, workload) if workload is not None else None,
            "nodeSelector": pod.get("nodeSelector") or {},
            "tolerations": pod.get("tolerations") or [],
        }
        out.update({f"replicatedJobs.{replicated['name']}.{k}": v for k, v in fields.items()})
    return out


async def take_jobset_snapshot(kube: KubeClient, namespaces: tuple[str, ...]) -> dict[str, Any]:
    """snapshot.py's state with the JobSet Jobs' pod names made stable in Events, and each JobSet's
    `jobset_fields`."""
    flat = indexed_pods_named(await take_snapshot(kube, namespaces))
    for ns in namespaces:
        workloads = (await kube.get(api_path(KUEUE, "workloads", ns)))["items"]
        stable = {wl["metadata"]["name"]: f"<workload of {workload_owner(wl)}>" for wl in workloads}
        for jobset in (await kube.get(api_path(JOBSET, "jobsets", ns)))["items"]:
            prefix = f"JobSet[{ns}/{jobset['metadata']['name']}]"
            flat.update({f"{prefix}.{k}": v for k, v in jobset_fields(jobset, stable).items()})
    return flat
