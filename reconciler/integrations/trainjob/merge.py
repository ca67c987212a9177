"""The strategic merge of a runtime patch's Job template into a runtime's, as the trainer applies
`spec.runtimePatches` (a strategic merge patch on a batch/v1 JobTemplateSpec).

Objects merge key by key (a null removes the key); lists whose Kubernetes type merges them by a
key (containers and env by name, volume mounts by mount path, ...) merge element by element, a
patch element replacing the fields it names; every other list (tolerations, command, args)
is replaced whole.
"""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["strategic_merge"]

# The lists a JobTemplateSpec's strategic merge merges, by field name, and their merge keys.
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "volumes": "name",
    "imagePullSecrets": "name",
    "schedulingGates": "name",
    "resourceClaims": "name",
    "ports": "containerPort",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}


def _merge_list(base: list[Any], patch: list[Any], key: str) -> list[Any]:
    out = [copy.deepcopy(item) for item in base]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            out.append(copy.deepcopy(item))
            continue
        for i, existing in enumerate(out):
            if isinstance(existing, dict) and existing.get(key) == item[key]:
                out[i] = strategic_merge(existing, item)
                break
        else:
            out.append(copy.deepcopy(item))
    return out


def strategic_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """`base` with `patch` merged in (neither is changed)."""
    out = copy.deepcopy(base)
    for name, value in patch.items():
        if value is None:
            out.pop(name, None)
        elif isinstance(value, dict) and isinstance(out.get(name), dict):
            out[name] = strategic_merge(out[name], value)
        elif isinstance(value, list) and name in _MERGE_KEYS and isinstance(out.get(name), list):
            out[name] = _merge_list(out[name], value, _MERGE_KEYS[name])
        else:
            out[name] = copy.deepcopy(value)
    return out
