"""An AppWrapper's pod sets, as Kueue v0.18.1 reads them through AppWrapper v1.2.2's utilities.

Per component, in order: the pod sets the AppWrapper controller recorded in
``status.componentStatus`` (once it has one entry per component), else the component's declared
``podSets``, else those inferred from the wrapped object's kind (`infer`): a batch/v1 Job (one,
``parallelism`` pods, fewer when ``completions`` is lower), a JobSet (one per replicated job,
its pods times its ``replicas``), a PyTorchJob (Master, Worker), a RayCluster or RayJob (the head,
then each worker group), a Pod, Deployment or StatefulSet (one, ``replicas``). A pod set whose
path leads to no pod template is left out. Each is named ``<AppWrapper>-<index>``.

The template recorded is the subset of the pod template Kueue compares and charges
(`kueue_template`), with the API server's defaults filled in as AppWrapper's GetPodTemplateSpec
does; beyond Kueue it keeps the pod's ``resourceClaims`` and each container's
``resources.claims`` (AppWrapper v1.2.2 drops them, so Kueue charges no DRA device for an
AppWrapper's pods: here its GPUs are charged as any job's).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from reconciler.api import PodSet
from reconciler.api.appwrapper import AppWrapper, AppWrapperPodSet, component

__all__ = ["PathError", "aw_pod_sets", "component_pod_sets", "infer", "kueue_template", "value_at"]

_STEP = re.compile(r"\.([^.\[]+)|\[(-?\d+)\]")


class PathError(ValueError):
    """A pod set's path leads nowhere in its component's template."""


def value_at(template: Any, path: str) -> Any:
    """The value at `path` in a decoded component template (``template`` is the template itself,
    then ``.field`` and ``[index]`` steps)."""
    if not path.startswith("template"):
        raise PathError(f"{path!r}: the first element of the path must be 'template'")
    cursor, rest, done = template, path[len("template") :], "template"
    while rest:
        step = _STEP.match(rest)
        if step is None:
            raise PathError(f"{path!r}: invalid path element at {rest!r}")
        key, index = step.group(1), step.group(2)
        if key is not None:
            if not isinstance(cursor, dict) or key not in cursor:
                raise PathError(f"{path!r}: no field {key!r} at {done!r}")
            cursor = cursor[key]
        else:
            i = int(index)
            if not isinstance(cursor, list) or not 0 <= i < len(cursor):
                raise PathError(f"{path!r}: no item {i} at {done!r}")
            cursor = cursor[i]
        done += step.group(0)
        rest = rest[step.end() :]
    return cursor


def _int_at(template: Any, path: str) -> int | None:
    try:
        value = value_at(template, path)
    except PathError:
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _job_pods(template: Any, prefix: str) -> int:
    pods = _int_at(template, prefix + "parallelism")
    pods = 1 if pods is None else pods
    completions = _int_at(template, prefix + "completions")
    return completions if completions is not None and completions < pods else pods


def _template_at(template: Any, path: str) -> bool:
    try:
        return isinstance(value_at(template, path), dict)
    except PathError:
        return False


def _ray(template: Any, prefix: str) -> list[AppWrapperPodSet]:
    sets = [AppWrapperPodSet(path=prefix + "headGroupSpec.template", replicas=1)]
    try:
        groups = value_at(template, prefix + "workerGroupSpecs")
    except PathError:
        return sets
    for i in range(len(groups) if isinstance(groups, list) else 0):
        group = f"{prefix}workerGroupSpecs[{i}]."
        if _template_at(template, group + "template"):
            replicas = _int_at(template, group + "replicas")
            sets.append(
                AppWrapperPodSet(path=group + "template", replicas=1 if replicas is None else replicas)
            )
    return sets


def _jobset(template: Any) -> list[AppWrapperPodSet]:
    try:
        jobs = value_at(template, "template.spec.replicatedJobs")
    except PathError:
        return []
    sets = []
    for i in range(len(jobs) if isinstance(jobs, list) else 0):
        job = f"template.spec.replicatedJobs[{i}]."
        if _template_at(template, job + "template"):
            replicas = _int_at(template, job + "replicas")
            count = (1 if replicas is None else replicas) * _job_pods(template, job + "template.spec.")
            sets.append(AppWrapperPodSet(path=job + "template.spec.template", replicas=count))
    return sets


def _pytorch(template: Any) -> list[AppWrapperPodSet]:
    sets = []
    for kind in ("Master", "Worker"):
        prefix = f"template.spec.pytorchReplicaSpecs.{kind}."
        if _template_at(template, prefix + "template"):
            replicas = _int_at(template, prefix + "replicas")
            sets.append(
                AppWrapperPodSet(path=prefix + "template", replicas=1 if replicas is None else replicas)
            )
    return sets


_SINGLE = {
    ("v1", "Pod"): ("template", ""),
    ("apps/v1", "Deployment"): ("template.spec.template", "template.spec.replicas"),
    ("apps/v1", "StatefulSet"): ("template.spec.template", "template.spec.replicas"),
}


def infer(obj: dict[str, Any]) -> list[AppWrapperPodSet]:
    """The pod sets AppWrapper infers for a wrapped object of a kind it knows (none for others)."""
    template = obj
    kind = (obj.get("apiVersion"), obj.get("kind"))
    if kind == ("batch/v1", "Job"):
        sets = [
            AppWrapperPodSet(path="template.spec.template", replicas=_job_pods(template, "template.spec."))
        ]
    elif kind == ("jobset.x-k8s.io/v1alpha2", "JobSet"):
        sets = _jobset(template)
    elif kind == ("kubeflow.org/v1", "PyTorchJob"):
        sets = _pytorch(template)
    elif kind == ("ray.io/v1", "RayCluster"):
        sets = _ray(template, "template.spec.")
    elif kind == ("ray.io/v1", "RayJob"):
        sets = _ray(template, "template.spec.rayClusterSpec.")
    elif kind in _SINGLE:
        path, replicas_path = _SINGLE[kind]
        if not _template_at(template, path):
            return []
        replicas = _int_at(template, replicas_path) if replicas_path else None
        sets = [AppWrapperPodSet(path=path, replicas=1 if replicas is None else replicas)]
    else:
        sets = []
    for ps in sets:
        pod_template(template, ps.path)  # (each must lead to a pod template: else PathError)
    return sets


def pod_template(template: Any, path: str) -> dict[str, Any]:
    """The pod template (or pod) at `path`: a map with a ``spec`` map."""
    found = value_at(template, path)
    if not isinstance(found, dict) or not isinstance(found.get("spec"), dict):
        raise PathError(f"{path!r}: the content there does not contain a spec")
    return found


def component_pod_sets(aw: AppWrapper) -> list[tuple[int, list[AppWrapperPodSet]]]:
    """Per component (its index), the pod sets Kueue reads: the recorded, declared or inferred."""
    components = [component(raw) for raw in aw.spec.components]
    recorded = aw.status.component_status
    if len(recorded) == len(components):
        return [(i, list(status.pod_sets)) for i, status in enumerate(recorded)]
    out = []
    for i, comp in enumerate(components):
        if comp.declared_pod_sets:
            out.append((i, list(comp.declared_pod_sets)))
        else:
            obj = msgspec.json.decode(comp.template)
            out.append((i, infer(obj) if isinstance(obj, dict) else []))
    return out


def aw_pod_sets(aw: AppWrapper) -> list[PodSet]:
    """The Workload's pod sets: one per pod set of each component whose path leads to a pod
    template, named ``<AppWrapper>-<index>`` in order."""
    sets: list[PodSet] = []
    for i, pod_sets in component_pod_sets(aw):
        template = msgspec.json.decode(component(aw.spec.components[i]).template)
        for ps in pod_sets:
            try:
                found = pod_template(template, ps.path)
            except PathError:
                continue  # (as GetComponentPodSpecs: left out)
            raw = msgspec.Raw(msgspec.json.encode(kueue_template(found)))
            count = 1 if ps.replicas is None else ps.replicas
            sets.append(PodSet(name=f"{aw.metadata.name}-{len(sets)}", template=raw, count=count))
    return sets


def _image_tag(image: str) -> str:
    """The tag of an image reference ("latest" with neither tag nor digest)."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2]
    return tag or ("" if digest else "latest")


def _container(src: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: src[k] for k in ("name", "image", "command", "args") if src.get(k)}
    resources = src.get("resources") or {}
    # (beyond Kueue: a container's DRA claims, so its devices are charged)
    out["resources"] = {k: resources[k] for k in ("requests", "limits", "claims") if resources.get(k)}
    out["terminationMessagePath"] = src.get("terminationMessagePath") or "/dev/termination-log"
    out["terminationMessagePolicy"] = src.get("terminationMessagePolicy") or "File"
    pull = src.get("imagePullPolicy") or (
        "Always" if _image_tag(str(src.get("image", ""))) == "latest" else "IfNotPresent"
    )
    out["imagePullPolicy"] = pull
    if src.get("securityContext"):
        out["securityContext"] = src["securityContext"]
    return out


def _strings(value: Any) -> dict[str, str]:
    return {k: v for k, v in value.items() if isinstance(v, str)} if isinstance(value, dict) else {}


def kueue_template(found: dict[str, Any]) -> dict[str, Any]:
    """The pod template Kueue records for a pod set: its labels and annotations, and the parts
    of its spec that Kueue compares and charges, defaulted as the API server would."""
    meta = found.get("metadata") if isinstance(found.get("metadata"), dict) else {}
    src: dict[str, Any] = found["spec"]
    metadata = {k: v for k in ("labels", "annotations") if (v := _strings((meta or {}).get(k)))}
    spec: dict[str, Any] = {}
    if src.get("initContainers"):
        spec["initContainers"] = [_container(c) for c in src["initContainers"]]
    spec["containers"] = [_container(c) for c in src.get("containers") or []]
    spec["restartPolicy"] = src.get("restartPolicy") or "Always"
    if src.get("terminationGracePeriodSeconds") is None:
        spec["terminationGracePeriodSeconds"] = 30  # (AppWrapper copies no value set: only the default)
    spec["dnsPolicy"] = src.get("dnsPolicy") or "ClusterFirst"
    for key in ("nodeSelector", "nodeName", "affinity", "tolerations", "priorityClassName", "overhead"):
        if src.get(key):
            spec[key] = src[key]
    spec["securityContext"] = src.get("securityContext") or {}
    spec["schedulerName"] = src.get("schedulerName") or "default-scheduler"
    spec["preemptionPolicy"] = src.get("preemptionPolicy") or "PreemptLowerPriority"
    if src.get("topologySpreadConstraints"):
        spec["topologySpreadConstraints"] = src["topologySpreadConstraints"]
    if src.get("resourceClaims"):
        spec["resourceClaims"] = src["resourceClaims"]  # (beyond Kueue: see the module's docstring)
    return {"metadata": metadata, "spec": spec}
