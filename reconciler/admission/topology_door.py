"""Topology requests at the door: a job whose pod templates ask for topology-aware scheduling is
refused by name while this controller does not place pods in topology domains.

The pod templates are found wherever the object holds them (``spec.template``,
``spec.replicatedJobs[].template.spec.template``, a Ray head or worker group's ``template``...):
any ``template`` whose ``metadata.annotations`` carry one of Kueue's pod-set topology annotations.
"""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.core.model.workloads import TOPOLOGY_REFUSAL
from reconciler.core.topology.requests import topology_annotations

from .fielderrors import FieldError, forbidden

__all__ = ["topology_requests_refused"]


def topology_requests_refused(raw: msgspec.Raw) -> list[FieldError]:
    """One error per topology annotation found on a pod template of the object."""
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return []
    errors: list[FieldError] = []
    _walk(obj, "", errors)
    return errors


def _walk(node: Any, path: str, errors: list[FieldError]) -> None:
    if isinstance(node, list):
        for i, item in enumerate(node):
            _walk(item, f"{path}[{i}]", errors)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key == "metadata" or not isinstance(value, dict | list):
            continue
        where = f"{path}.{key}" if path else key
        if key == "template" and isinstance(value, dict):
            meta = value.get("metadata")
            annotations = meta.get("annotations") if isinstance(meta, dict) else None
            if isinstance(annotations, dict):
                for name in topology_annotations(annotations):
                    errors.append(forbidden(f"{where}.metadata.annotations[{name}]", TOPOLOGY_REFUSAL))
        _walk(value, where, errors)
