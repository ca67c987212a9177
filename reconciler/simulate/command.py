"""`reconciler simulate`: read manifests, admit offline, print what the API would show."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from reconciler.api.times import now_rfc3339
from reconciler.config import ConfigError, Configuration, load_config, named
from reconciler.core.queueing.admission_fair_sharing import AfsSettings
from reconciler.integrations import check_frameworks, describe_unimplemented

from .inputs import InputObject, SimulationError, SimulationResult
from .run import FairSharing, simulate
from .whatif import WhatIfSettings

__all__ = ["InputError", "collect_objects", "render", "run_simulation", "settings_of"]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class InputError(ValueError):
    """A manifest path or document that cannot be read."""


def _manifest_files(paths: Iterable[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            files.extend(sorted(p for p in path.iterdir() if p.suffix in MANIFEST_SUFFIXES))
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(f"{raw}: no such file or directory")
    return files


def collect_objects(paths: Iterable[str]) -> list[InputObject]:
    """Every document of every file, in order; `List` objects are flattened."""
    objects: list[InputObject] = []
    for file in _manifest_files(paths):
        try:
            docs = list(yaml.safe_load_all(file.read_text()))
        except yaml.YAMLError as err:
            raise InputError(f"{file}: not valid YAML: {err}") from None
        except OSError as err:
            raise InputError(f"{file}: cannot read: {err.strerror}") from None
        for index, doc in enumerate(docs):
            if doc is None:
                continue
            where = f"{file.name}#{index}"
            if not isinstance(doc, dict) or "kind" not in doc:
                raise InputError(f"{where}: not a Kubernetes object (missing kind)")
            if doc["kind"].endswith("List") and isinstance(doc.get("items"), list):
                objects.extend(
                    InputObject(f"{where}.items[{i}]", item) for i, item in enumerate(doc["items"])
                )
            else:
                objects.append(InputObject(where, doc))
    return objects


def settings_of(config: Configuration) -> WhatIfSettings:
    """The Configuration's parts an admission run reads."""
    wait = config.wait_for_pods_ready
    afs = config.admission_fair_sharing
    admission = (
        None
        if afs is None
        else AfsSettings(afs.usage_half_life_seconds, afs.usage_sampling_seconds, afs.resource_weights)
    )
    return WhatIfSettings(
        mappings=config.class_to_resource,
        inventory_mode=config.device_inventory.mode,
        requeuing_timestamp=wait.requeuing_timestamp if wait is not None else "Eviction",
        capacities=config.class_capacities,
        frameworks=config.frameworks,
        fair=FairSharing(config.fair_sharing_strategies, admission),
        extended_resources=config.extended_resources,
    )


def run_simulation(config_path: str, manifest_paths: Sequence[str]) -> SimulationResult:
    config = load_config(config_path)
    try:
        unimplemented = check_frameworks(config)
    except ConfigError as err:
        raise ConfigError(named(config_path, err)) from None
    objects = collect_objects(manifest_paths)
    settings = settings_of(config)
    result = simulate(
        objects,
        settings.mappings,
        now_rfc3339(),
        settings.inventory_mode,
        settings.requeuing_timestamp,
        settings.capacities,
        settings.frameworks,
        settings.fair,
        settings.extended_resources,
    )
    if unimplemented:
        result.warnings.insert(0, describe_unimplemented(unimplemented))
    return result


def _column(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "   ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    for c in obj.get("status", {}).get("conditions", []):
        if c.get("type") == kind:
            return dict(c)
    return {}


def _condition_status(obj: dict[str, Any], kind: str) -> str:
    return str(_condition(obj, kind).get("status", ""))


def _active_reason(obj: dict[str, Any], kind: str) -> str:
    found = _condition(obj, kind)
    return str(found.get("reason", "")) if found.get("status") == "True" else ""


def _evictions(result: SimulationResult, with_ns: bool) -> list[list[str]]:
    """Workloads evicted (preempted) during the run and not admitted since: their conditions' reasons."""
    rows = [(["NAMESPACE"] if with_ns else []) + ["NAME", "EVICTED", "PREEMPTED", "REQUEUED"]]
    for w in result.workloads:
        evicted, preempted = _active_reason(w, "Evicted"), _active_reason(w, "Preempted")
        if evicted or preempted:
            rows.append(
                ([w["metadata"].get("namespace", "")] if with_ns else [])
                + [
                    f"workload.kueue.x-k8s.io/{w['metadata']['name']}",
                    evicted,
                    preempted,
                    _condition_status(w, "Requeued"),
                ]
            )
    return rows


def _table(result: SimulationResult) -> str:
    namespaces = {w["metadata"].get("namespace", "") for w in result.workloads}
    with_ns = len(namespaces) > 1
    rows = [(["NAMESPACE"] if with_ns else []) + ["NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED"]]
    for w in result.workloads:
        admission = w.get("status", {}).get("admission") or {}
        rows.append(
            ([w["metadata"].get("namespace", "")] if with_ns else [])
            + [
                f"workload.kueue.x-k8s.io/{w['metadata']['name']}",
                w.get("spec", {}).get("queueName", ""),
                admission.get("clusterQueue", ""),
                _condition_status(w, "Admitted"),
                _condition_status(w, "Finished"),
            ]
        )
    parts = [_column(rows)]
    cq_rows = [["NAME", "COHORT", "PENDING WORKLOADS", "ADMITTED WORKLOADS"]]
    for cq in result.cluster_queues:
        status = cq.get("status", {})
        cq_rows.append(
            [
                f"clusterqueue.kueue.x-k8s.io/{cq['metadata']['name']}",
                str(cq.get("spec", {}).get("cohortName", "") or ""),
                str(status.get("pendingWorkloads", 0)),
                str(status.get("admittedWorkloads", 0)),
            ]
        )
    if len(cq_rows) > 1:
        parts.append(_column(cq_rows))
    evicted_rows = _evictions(result, with_ns)
    if len(evicted_rows) > 1:
        parts.append(_column(evicted_rows))
    return "\n\n".join(parts) + "\n"


def render(result: SimulationResult, output: str) -> str:
    objects = [*result.workloads, *result.cluster_queues]
    if output == "json":
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}, indent=2) + "\n"
    if output == "table":
        return _table(result)
    return yaml.safe_dump_all(objects, sort_keys=False, explicit_start=True, width=1 << 16)


__all__ += ["ConfigError", "SimulationError"]
