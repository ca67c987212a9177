"""A pod set's ``topologyAssignment`` between v1beta1 (``domains``: each domain's values per level
and its pod count) and v1beta2 (``slices``: compact runs of domains). Going up, the domains are
written as one compact slice as Kueue v0.18.1 writes them (``reconciler.core.topology.assignment``);
going down, every slice is expanded to its domains in order."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

import msgspec

from reconciler.api import TopologyAssignment
from reconciler.core.topology.assignment import decode_assignment, encode_assignment
from reconciler.core.topology.placement import DomainCount, Placed

from .fields import ConversionError, Obj, items_of, list_at

__all__ = ["assignment_down", "assignment_up"]


def _levels(assignment: Obj, path: str) -> list[str]:
    levels = list_at(assignment, "levels", path)
    for i, level in enumerate(levels):
        if not isinstance(level, str):
            raise ConversionError(f"{path}.levels[{i}]", "must be a node label key (a string)")
    return levels


def assignment_up(assignment: Obj, path: str) -> None:
    """v1beta1 ``domains`` in ``assignment`` replaced by v1beta2 ``slices``."""
    levels = _levels(assignment, path)
    domains: list[DomainCount] = []
    for where, domain in items_of(assignment, "domains", path):
        values = list_at(domain, "values", where)
        if len(values) != len(levels) or not all(isinstance(v, str) for v in values):
            raise ConversionError(
                f"{where}.values", f"must be {len(levels)} strings, one per level of {path}.levels"
            )
        count = domain.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise ConversionError(f"{where}.count", "must be a pod count (an integer, 0 or more)")
        domains.append(DomainCount(tuple(values), count))
    encoded = encode_assignment(Placed(tuple(levels), tuple(domains)))
    assignment.pop("domains", None)
    assignment.pop("slices", None)
    if encoded.slices:  # v1beta2 omits empty levels and slices
        assignment["slices"] = msgspec.to_builtins(encoded.slices)
    if not levels:
        assignment.pop("levels", None)


def assignment_down(assignment: Obj, path: str) -> None:
    """v1beta2 ``slices`` in ``assignment`` replaced by v1beta1 ``domains``."""
    levels = _levels(assignment, path)
    for where, piece in items_of(assignment, "slices", path):
        _check_slice(piece, where, len(levels))
    try:
        decoded = msgspec.convert(
            {"levels": levels, "slices": list_at(assignment, "slices", path)}, TopologyAssignment
        )
    except msgspec.ValidationError as err:
        raise ConversionError(f"{path}.slices", f"not a topology assignment: {err}") from None
    placed = decode_assignment(decoded)
    assignment.pop("slices", None)
    assignment["levels"] = levels
    assignment["domains"] = [{"values": list(d.values), "count": d.count} for d in placed.domains]


def _check_slice(piece: MutableMapping[str, Any], where: str, level_count: int) -> None:
    count = piece.get("domainCount")
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ConversionError(f"{where}.domainCount", "must be a number of domains (an integer, 0 or more)")
    per_level = list_at(piece, "valuesPerLevel", where)
    if len(per_level) != level_count:
        raise ConversionError(f"{where}.valuesPerLevel", f"must have {level_count} entries, one per level")
    for i, level in enumerate(per_level):
        roots = ((level or {}).get("individual") or {}).get("roots") if isinstance(level, dict) else None
        if isinstance(level, dict) and level.get("universal") is None and len(roots or []) != count:
            raise ConversionError(
                f"{where}.valuesPerLevel[{i}]", f"must have a universal value or {count} individual roots"
            )
    pods = piece.get("podCounts")
    individual = pods.get("individual") if isinstance(pods, dict) else None
    if not isinstance(pods, dict) or (pods.get("universal") is None and len(individual or []) != count):
        raise ConversionError(
            f"{where}.podCounts", f"must have a universal count or {count} individual counts"
        )
