"""Configuration `admissionFairSharing` (both versions): Kueue v0.18.1's defaults and validation,
each error naming the field; the section is acted on (not listed as without effect) and a change
needs a restart."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.config import ConfigError, parse_config, with_live_changes


def doc(version: str = "v1beta2", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration", **fields}


def test_off_without_the_section() -> None:
    assert parse_config(doc()).admission_fair_sharing is None
    assert parse_config(doc("v1beta1")).admission_fair_sharing is None


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_values_are_read_in_seconds_with_weights(version: str) -> None:
    section = {
        "usageHalfLifeTime": "168h",
        "usageSamplingInterval": "1m30s",
        "resourceWeights": {"nvidia.com/gpu": 100, "cpu": 0, "example.com/gpu-memory": 0.5},
    }
    config = parse_config(doc(version, admissionFairSharing=section))
    afs = config.admission_fair_sharing
    assert afs is not None
    assert afs.usage_half_life_seconds == 168 * 3600
    assert afs.usage_sampling_seconds == 90
    assert dict(afs.resource_weights) == {"nvidia.com/gpu": 100.0, "cpu": 0.0, "example.com/gpu-memory": 0.5}
    assert "admissionFairSharing" not in [f.path for f in config.ignored_fields]


@pytest.mark.parametrize("sampling", [None, "0s", "0"])
def test_kueue_defaults_sampling_to_five_minutes_and_half_life_to_zero(sampling: str | None) -> None:
    section = {} if sampling is None else {"usageSamplingInterval": sampling}
    afs = parse_config(doc(admissionFairSharing=section)).admission_fair_sharing
    assert afs is not None
    assert afs.usage_sampling_seconds == 300
    assert afs.usage_half_life_seconds == 0
    assert dict(afs.resource_weights) == {}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        (
            {"usageHalfLifeTime": "-1h"},
            r"^admissionFairSharing.usageHalfLifeTime: Invalid value: '-1h': "
            r"must be greater than or equal to 0$",
        ),
        (
            {"usageSamplingInterval": "-5m"},
            r"^admissionFairSharing.usageSamplingInterval: Invalid value: '-5m': must be greater than 0$",
        ),
        (
            {"resourceWeights": {"nvidia.com/gpu": -1}},
            r"^admissionFairSharing.resourceWeights\[nvidia.com/gpu\]: Invalid value: -1: "
            r"must be greater than or equal to 0$",
        ),
        ({"resourceWeights": {"cpu": "high"}}, r"^admissionFairSharing.resourceWeights\[cpu\]: expected"),
        ({"usageHalfLifeTime": "a week"}, r"^admissionFairSharing.usageHalfLifeTime: 'a week' is not a"),
        ({"enable": True}, r"^admissionFairSharing.enable: unknown field"),
    ],
)
def test_bad_values_are_refused_naming_the_field(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config(doc(admissionFairSharing=section))


def test_a_changed_section_needs_a_restart() -> None:
    before = parse_config(doc(admissionFairSharing={"usageHalfLifeTime": "1h"}))
    after = parse_config(doc(admissionFairSharing={"usageHalfLifeTime": "2h"}))
    kept, restart = with_live_changes(before, after)
    assert restart == ["admissionFairSharing"]
    assert kept.admission_fair_sharing == before.admission_fair_sharing
