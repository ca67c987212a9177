"""Per-pod resource requests, computed as Kubernetes computes them.

Mirrors the scheduler's rule: regular containers are summed; a plain init
container runs alone (plus the sidecars started before it), so the pod needs
the largest of those; sidecars (init containers with restartPolicy Always)
keep running and add to the total; pod-level requests, when set, win for the
resources they name; overhead is added last. Limits stand in for missing
requests, as the API server defaults them on real pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from reconciler.api import ContainerView, PodSpecView, ResourceRequirements

from .quantity import parse_quantity, to_amount

__all__ = ["Amounts", "add_amounts", "pod_requests", "scale_amounts"]

Amounts = dict[str, int]


def _requirement_amounts(res: ResourceRequirements) -> Amounts:
    merged: dict[str, str | int] = dict(res.limits)
    merged.update(res.requests)
    return {name: to_amount(name, parse_quantity(value)) for name, value in merged.items()}


def add_amounts(into: Amounts, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        into[name] = into.get(name, 0) + value


def _max_into(into: Amounts, other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


def scale_amounts(amounts: Mapping[str, int], factor: int) -> Amounts:
    return {name: value * factor for name, value in amounts.items()}


def _sum_containers(containers: Iterable[ContainerView]) -> Amounts:
    total: Amounts = {}
    for container in containers:
        add_amounts(total, _requirement_amounts(container.resources))
    return total


def pod_requests(spec: PodSpecView) -> Amounts:
    """Requests of one pod of this spec, in Kueue amounts (see quantity.py)."""
    total = _sum_containers(spec.containers)
    sidecars: Amounts = {}
    init_peak: Amounts = {}
    for init in spec.init_containers:
        own = _requirement_amounts(init.resources)
        if init.restart_policy == "Always":
            add_amounts(total, own)
            add_amounts(sidecars, own)
            running = dict(sidecars)
        else:
            running = dict(own)
            add_amounts(running, sidecars)
        _max_into(init_peak, running)
    _max_into(total, init_peak)
    if spec.resources is not None:
        total.update(_requirement_amounts(spec.resources))
    if spec.overhead:
        add_amounts(total, {n: to_amount(n, parse_quantity(v)) for n, v in spec.overhead.items()})
    return {name: value for name, value in total.items() if value != 0}
