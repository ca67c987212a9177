"""Configuration `fairSharing` (both versions) and `spec.fairSharing.weight` on ClusterQueues and
Cohorts: Kueue's defaults and validation, with errors naming the field and the fix."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from reconciler.api import ClusterQueue, Cohort
from reconciler.config import ConfigError, parse_config
from reconciler.core.model.clusterqueues import InvalidClusterQueueError, compile_cluster_queue
from reconciler.core.quota.cohorts import compile_cohort
from tests.support.builders import cluster_queue_body, decode

BOTH = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


def doc(version: str = "v1beta2", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration", **fields}


def test_fair_sharing_is_off_without_the_section() -> None:
    assert parse_config(doc()).fair_sharing is None
    assert parse_config(doc("v1beta1")).fair_sharing is None


@pytest.mark.parametrize("strategies", [list(BOTH), [BOTH[0]], [BOTH[1]]])
def test_v1beta2_presence_turns_it_on_with_the_strategies_given(strategies: list[str]) -> None:
    config = parse_config(doc(fairSharing={"preemptionStrategies": strategies}))
    assert config.fair_sharing is not None
    assert config.fair_sharing.preemption_strategies == tuple(strategies)
    assert "fairSharing" not in [f.path for f in config.ignored_fields]


def test_v1beta2_needs_the_strategies() -> None:
    with pytest.raises(ConfigError, match=r"^fairSharing.preemptionStrategies: Required value"):
        parse_config(doc(fairSharing={}))


def test_v1beta1_needs_enable_and_defaults_to_both_strategies() -> None:
    assert parse_config(doc("v1beta1", fairSharing={"enable": False})).fair_sharing is None
    # Off: its strategies are not looked at (Kueue drops the section when converting).
    off = doc("v1beta1", fairSharing={"enable": False, "preemptionStrategies": ["Nope"]})
    assert parse_config(off).fair_sharing is None
    on = parse_config(doc("v1beta1", fairSharing={"enable": True})).fair_sharing
    assert on is not None
    assert on.preemption_strategies == BOTH


@pytest.mark.parametrize(
    "strategies",
    [[BOTH[1], BOTH[0]], [BOTH[0], BOTH[0]], ["LessThanFinalShare"], [*BOTH, BOTH[1]]],
)
def test_only_kueues_three_lists_are_accepted(strategies: list[str]) -> None:
    for version, extra in (("v1beta2", {}), ("v1beta1", {"enable": True})):
        with pytest.raises(ConfigError) as err:
            parse_config(doc(version, fairSharing={**extra, "preemptionStrategies": strategies}))
        message = str(err.value)
        assert message.startswith("fairSharing.preemptionStrategies: Unsupported value")
        assert '"LessThanOrEqualToFinalShare,LessThanInitialShare"' in message


def test_unknown_fields_and_the_other_versions_field_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"^fairSharing.enable: unknown field"):
        parse_config(doc(fairSharing={"enable": True, "preemptionStrategies": list(BOTH)}))
    with pytest.raises(ConfigError, match=r"^fairSharing.enable: expected true or false"):
        parse_config(doc("v1beta1", fairSharing={"enable": "yes"}))


def cq_with_weight(weight: object) -> ClusterQueue:
    body = cluster_queue_body("a", [("t4", {"nvidia.com/gpu": 1})], cohort="org")
    body["spec"]["fairSharing"] = {"weight": weight}
    result: ClusterQueue = decode(body, ClusterQueue)
    return result


@pytest.mark.parametrize(
    ("weight", "expected"),
    [
        (2, Fraction(2)),
        ("0.5", Fraction(1, 2)),
        ("0", Fraction(0)),
        ("500m", Fraction(1, 2)),
        (1.5, Fraction(3, 2)),
    ],
)
def test_cluster_queue_weight_is_parsed_exactly(weight: object, expected: Fraction) -> None:
    assert compile_cluster_queue(cq_with_weight(weight)).fair_weight == expected


def test_weight_defaults_to_one() -> None:
    body = cluster_queue_body("a", [("t4", {"nvidia.com/gpu": 1})])
    assert compile_cluster_queue(decode(body, ClusterQueue)).fair_weight == 1
    body["spec"]["fairSharing"] = {}
    assert compile_cluster_queue(decode(body, ClusterQueue)).fair_weight == 1


@pytest.mark.parametrize(
    ("weight", "problem"),
    [("-1", "greater than or equal to 0"), ("1n", "weight must be > 10e-9"), ("x", "quantity")],
)
def test_bad_weights_name_the_field(weight: str, problem: str) -> None:
    with pytest.raises(InvalidClusterQueueError, match=r"^spec.fairSharing.weight: ") as err:
        compile_cluster_queue(cq_with_weight(weight))
    assert problem in str(err.value)


def test_cohort_weight() -> None:
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "team"},
        "spec": {"parentName": "org", "fairSharing": {"weight": "3"}},
    }
    assert compile_cohort(decode(body, Cohort)).fair_weight == 3
    body["spec"] = {"fairSharing": {"weight": "-2"}}
    with pytest.raises(InvalidClusterQueueError, match=r"^spec.fairSharing.weight: "):
        compile_cohort(decode(body, Cohort))
