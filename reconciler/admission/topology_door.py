"""Topology requests at the door. A batch/v1 Job or a JobSet (the kinds whose door says
`placement`) may ask for topology-aware scheduling with ``kueue.x-k8s.io/podset-required-topology``,
``-preferred-topology`` or ``-unconstrained-topology`` on a pod template, checked as Kueue checks
them (one of the three at most, a level that is a label name, a boolean); slices and pod-set groups
are refused by name (not done here). A job of any other kind asking for it is refused by name: this
controller places only those kinds' pods in topology domains.

The pod templates are found wherever the object holds them (``spec.template``,
``spec.replicatedJobs[].template.spec.template``, a Ray head or worker group's ``template``...):
any ``template`` whose ``metadata.annotations`` carry one of Kueue's pod-set topology annotations.
"""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.core.model.workloads import TOPOLOGY_REFUSAL
from reconciler.core.topology.requests import (
    PREFERRED,
    REQUIRED,
    TOPOLOGY_UNSUPPORTED,
    UNCONSTRAINED,
    topology_annotations,
)

from .fielderrors import FieldError, forbidden, invalid, invalid_omitted
from .names import qualified_name

__all__ = ["topology_requests_refused"]


_PLACEMENT = (REQUIRED, PREFERRED, UNCONSTRAINED)
_BOOLEANS = ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False")
_MORE_THAN_ONE = (
    "must not contain more than one topology annotation: ["
    + ", ".join(f'"{name}"' for name in _PLACEMENT)
    + "]"
)


def topology_requests_refused(raw: msgspec.Raw, *, placement: bool = False) -> list[FieldError]:
    """The errors of the topology annotations found on the object's pod templates: each one is
    refused, or with `placement` (a batch/v1 Job) the placement ones are checked and only slices
    and groups refused."""
    try:
        obj = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        return []
    errors: list[FieldError] = []
    _walk(obj, "", errors, placement)
    return errors


def _walk(node: Any, path: str, errors: list[FieldError], placement: bool) -> None:
    if isinstance(node, list):
        for i, item in enumerate(node):
            _walk(item, f"{path}[{i}]", errors, placement)
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
                errors += _checked(f"{where}.metadata.annotations", annotations, placement)
        _walk(value, where, errors, placement)


def _checked(path: str, annotations: dict[str, Any], placement: bool) -> list[FieldError]:
    names = topology_annotations(annotations)
    if not placement:
        return [forbidden(f"{path}[{name}]", TOPOLOGY_REFUSAL) for name in names]
    errors = [forbidden(f"{path}[{n}]", TOPOLOGY_UNSUPPORTED) for n in names if n not in _PLACEMENT]
    if sum(name in annotations for name in _PLACEMENT) > 1:
        errors.append(invalid_omitted(path, _MORE_THAN_ONE))
    for name in (REQUIRED, PREFERRED):
        if name in annotations:
            errors += qualified_name(f"{path}[{name}]", str(annotations[name]))
    if UNCONSTRAINED in annotations and annotations[UNCONSTRAINED] not in _BOOLEANS:
        errors.append(
            invalid(f"{path}[{UNCONSTRAINED}]", annotations[UNCONSTRAINED], "must be a boolean value")
        )
    return errors
