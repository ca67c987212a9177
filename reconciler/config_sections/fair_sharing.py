"""``fairSharing``: cohort fair sharing and its preemption strategies, as each Configuration version
spells it.

In v1beta2 the section's presence turns fair sharing on and ``preemptionStrategies`` must be
given; in v1beta1 ``enable: true`` turns it on and an empty list defaults to both strategies.
Only Kueue's three lists are accepted: a list is tried in order, and the second strategy only
makes sense after the first.
"""

from __future__ import annotations

from dataclasses import dataclass

from .fields import ConfigError, check_unknown, expect

__all__ = [
    "LESS_THAN_INITIAL_SHARE",
    "LESS_THAN_OR_EQUAL_TO_FINAL_SHARE",
    "VALID_STRATEGY_LISTS",
    "FairSharingConfig",
    "parse_fair_sharing",
]

LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"
VALID_STRATEGY_LISTS: tuple[tuple[str, ...], ...] = (
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (LESS_THAN_INITIAL_SHARE,),
    (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE),
)
_BOTH = (LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, LESS_THAN_INITIAL_SHARE)


@dataclass(frozen=True)
class FairSharingConfig:
    """Fair sharing is on: the preemption strategies in the order they are tried."""

    preemption_strategies: tuple[str, ...] = _BOTH


def _strategies(raw: object, path: str, default: tuple[str, ...] | None) -> tuple[str, ...]:
    if raw is None or raw == []:
        if default is not None:
            return default
        raise ConfigError(
            f"{path}: Required value: must be specified; e.g. "
            f"[{LESS_THAN_OR_EQUAL_TO_FINAL_SHARE}, {LESS_THAN_INITIAL_SHARE}]"
        )
    items = expect(raw, list, path, "a list of strategy names")
    listed = tuple(items)
    if listed not in VALID_STRATEGY_LISTS:
        supported = ", ".join(f'"{",".join(s)}"' for s in VALID_STRATEGY_LISTS)
        raise ConfigError(
            f"{path}: Unsupported value: {list(listed)!r}: supported values: {supported}; "
            "list one of them, in that order"
        )
    return listed


def parse_fair_sharing(raw: object, version: str) -> FairSharingConfig | None:
    """The ``fairSharing`` section of a `version` Configuration; None when fair sharing is off."""
    path = "fairSharing"
    if raw is None:
        return None
    obj = expect(raw, dict, path, "an object")
    allowed = {"preemptionStrategies"}
    if version == "v1beta1":
        allowed |= {"enable"}
    check_unknown(obj, allowed, path)
    spath = f"{path}.preemptionStrategies"
    if version == "v1beta1":
        enable = expect(obj.get("enable", False), bool, f"{path}.enable", "true or false")
        if not enable:
            return None
        return FairSharingConfig(_strategies(obj.get("preemptionStrategies"), spath, _BOTH))
    return FairSharingConfig(_strategies(obj.get("preemptionStrategies"), spath, None))
