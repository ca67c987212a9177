"""The dry run through the API (beyond Kueue): `POST .../namespaces/NS/whatifs` with a `WhatIf`
naming objects as they would be created; the answer is the same `WhatIf` with, in its status,
whether each Workload they make would be admitted now, where, and whom it would preempt.

The request and the answer, pure: the body checked field by field (every refusal names the field
and the fix), and the verdicts shaped for the user who asked. A user who may create `whatifs` in
a namespace asks about that namespace's objects only; victims in other namespaces are counted and
given with their reason, never by name (the asker may not be able to read them).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = [
    "KIND",
    "MAX_BODY",
    "MAX_OBJECTS",
    "RESOURCE",
    "VERSION",
    "WHATIF_GROUP",
    "DryRunAnswer",
    "DryRunner",
    "RequestError",
    "answer_document",
    "parse_request",
]

WHATIF_GROUP = "whatif.dra-quota.dev"
VERSION = "v1alpha1"
KIND = "WhatIf"
RESOURCE = "whatifs"
MAX_OBJECTS = 100
MAX_BODY = 3 * 1024 * 1024
_API_VERSION = f"{WHATIF_GROUP}/{VERSION}"


@dataclass(frozen=True, slots=True)
class DryRunAnswer:
    """The dry run's verdicts (one mapping per Workload: namespace, workload, admitted,
    clusterQueue, flavors, waiting, preempts) and its warnings."""

    workloads: list[dict[str, Any]]
    warnings: list[str]


class DryRunner(Protocol):
    async def __call__(self, namespace: str, objects: Sequence[Mapping[str, Any]]) -> DryRunAnswer:
        """Would these objects (of `namespace`) be admitted now: against the live queues."""
        ...


class RequestError(ValueError):
    """The request body is not a WhatIf this server can answer (the message names the field)."""


_WANTED: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}


def _field(obj: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind):
        raise RequestError(f"{where}.{name}: must be {_WANTED[kind]}")
    return value


def parse_request(body: bytes, namespace: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The WhatIf asked for and its objects, each in `namespace` (set when the object names none)."""
    if len(body) > MAX_BODY:
        raise RequestError(f"the request body is over {MAX_BODY} bytes: ask about fewer objects at once")
    try:
        request = json.loads(body or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise RequestError(f"the request body is not JSON ({err}): send a {KIND} as JSON") from err
    if not isinstance(request, dict):
        raise RequestError(f"the request body must be a {KIND} object")
    if request.get("apiVersion") != _API_VERSION or request.get("kind") != KIND:
        raise RequestError(
            f'apiVersion, kind: "{request.get("apiVersion")}", "{request.get("kind")}": '
            f"set apiVersion: {_API_VERSION} and kind: {KIND}"
        )
    meta = request.get("metadata") or {}
    if not isinstance(meta, dict):
        raise RequestError("metadata: must be an object")
    if meta.get("namespace", namespace) != namespace:
        raise RequestError(
            f'metadata.namespace: "{meta["namespace"]}" is not the namespace of the path ("{namespace}")'
        )
    objects = _field(_field(request, "spec", dict, "WhatIf"), "objects", list, "spec")
    if not objects or len(objects) > MAX_OBJECTS:
        raise RequestError(f"spec.objects: give 1 to {MAX_OBJECTS} objects (got {len(objects)})")
    asked = []
    for i, obj in enumerate(objects):
        where = f"spec.objects[{i}]"
        if not isinstance(obj, dict):
            raise RequestError(f"{where}: must be an object (a manifest)")
        for name in ("apiVersion", "kind"):
            _field(obj, name, str, where)
        obj_meta = _field(obj, "metadata", dict, where)
        _field(obj_meta, "name", str, f"{where}.metadata")
        if obj_meta.get("namespace", namespace) != namespace:
            raise RequestError(
                f'{where}.metadata.namespace: "{obj_meta["namespace"]}": a {KIND} in namespace "{namespace}" '
                f'asks about that namespace\'s objects only; ask in namespace "{obj_meta["namespace"]}"'
            )
        asked.append({**obj, "metadata": {**obj_meta, "namespace": namespace}})
    return request, asked


def _shown(verdict: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    """One verdict as the asker sees it: victims of other namespaces without their names."""
    preempts = []
    for victim in verdict.get("preempts") or ():
        if victim.get("namespace") == namespace:
            preempts.append(dict(victim))
        else:
            preempts.append(
                {
                    "namespace": "",
                    "name": "",
                    "reason": victim.get("reason", ""),
                    "message": "a Workload of another namespace (not named to this user)",
                }
            )
    shown = {k: v for k, v in verdict.items() if k != "preempts"}
    shown["preempts"] = preempts
    return shown


def answer_document(request: Mapping[str, Any], namespace: str, answer: DryRunAnswer) -> dict[str, Any]:
    """The WhatIf asked for, with the verdicts in its status (fields in camelCase)."""
    meta = dict(request.get("metadata") or {})
    meta["namespace"] = namespace
    workloads = [_camel(_shown(v, namespace)) for v in answer.workloads]
    return {
        "apiVersion": _API_VERSION,
        "kind": KIND,
        "metadata": meta,
        "spec": request.get("spec"),
        "status": {"workloads": workloads, "warnings": list(answer.warnings)},
    }


def _camel(verdict: Mapping[str, Any]) -> dict[str, Any]:
    def camel(name: str) -> str:
        head, *rest = name.split("_")
        return head + "".join(p.capitalize() for p in rest)

    return {camel(k): v for k, v in verdict.items()}
