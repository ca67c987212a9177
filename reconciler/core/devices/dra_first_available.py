"""``firstAvailable`` requests, which Kueue rejects: the first subrequest whose DeviceClass is
mapped to a resource the Workload's ClusterQueue covers is charged (else the first mapped one), and
the choice is recorded so the Workload can show it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .dra_devices import Charging, Requests, charge_device, tolerations_of
from .dra_problems import DraProblem, field_error, mode_problem, unmapped

__all__ = ["Covered", "first_available"]

# Whether the Workload's ClusterQueue has quota for a logical resource.
Covered = Callable[[str], bool]


def first_available(
    subrequests: Sequence[Mapping[str, Any]],
    *,
    path: str,
    prefix: str,
    what: str,
    request: str,
    charging: Charging,
    pod_set_name: str,
    into: Requests,
    covered: Covered | None,
) -> DraProblem | None:
    """Charge the first mapped subrequest the ClusterQueue covers (else the first mapped one)."""
    mappings = charging.mappings
    mapped = [
        (index, sub, mappings[str(sub.get("deviceClassName") or "")])
        for index, sub in enumerate(subrequests)
        if str(sub.get("deviceClassName") or "") in mappings
    ]
    if covered is not None:
        mapped = [m for m in mapped if covered(m[2])] or mapped
    for index, sub, logical in mapped[:1]:
        device_class = str(sub.get("deviceClassName") or "")
        mode = str(sub.get("allocationMode") or "ExactCount")
        sub_path = f"{path}.firstAvailable[{index}]"
        problem = mode_problem(f"{sub_path}.allocationMode", mode, prefix, charging.sized)
        if problem is not None:
            return problem
        raw_count = sub.get("count")
        count = raw_count if isinstance(raw_count, int) and not isinstance(raw_count, bool) else 1
        label = f"{what}: subrequest {sub.get('name') or index}"
        problem = charge_device(
            into,
            device_class=device_class,
            logical=logical,
            mode=mode,
            count=count,
            capacity=sub.get("capacity"),
            selectors=sub.get("selectors"),
            path=sub_path,
            prefix=prefix,
            label=label,
            charging=charging,
            ask=(request, str(sub.get("name") or index), tolerations_of(sub.get("tolerations"))),
        )
        if problem is not None:
            return problem
        amount = "all devices on the node" if mode == "All" else str(count)
        into.choices.append(f"{label} (DeviceClass {device_class} charged as {amount} {logical})")
        return None
    classes = sorted({str(s.get("deviceClassName") or "") for s in subrequests} - {""})
    if not classes:
        return DraProblem(
            field_error(
                f"{path}.firstAvailable", "Required value", None, prefix + "no subrequest names a DeviceClass"
            )
        )
    return unmapped(f"{path}.firstAvailable", classes[0], pod_set_name)
