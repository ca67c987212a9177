"""featureGates: Kueue's KueueDRAIntegrationExtendedResource (alpha, off by default in Kueue v0.18.1)
switches on charging extended resources through the DeviceClass declaring them; other gates have
no effect and are named; what Kueue refuses is refused with the field named."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.config import ConfigError, parse_config, with_live_changes


def config(gates: Any) -> Any:
    return parse_config(
        {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "featureGates": gates}
    )


def test_the_gate_is_off_by_default_as_in_kueue() -> None:
    assert (
        parse_config(
            {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
        ).extended_resources
        is False
    )
    assert config({"KueueDRAIntegrationExtendedResource": False}).extended_resources is False


def test_the_gate_on_is_acted_on_and_not_named_as_without_effect() -> None:
    on = config({"KueueDRAIntegrationExtendedResource": True, "KueueDRAIntegration": True})
    assert on.extended_resources is True
    assert [f.path for f in on.ignored_fields] == []


def test_other_gates_are_named_as_without_effect() -> None:
    mixed = config({"KueueDRAIntegrationExtendedResource": True, "TopologyAwareScheduling": True})
    assert mixed.extended_resources is True
    assert [f.path for f in mixed.ignored_fields] == ["featureGates"]
    assert "other than KueueDRAIntegrationExtendedResource" in mixed.ignored_fields[0].reason
    # The gates given without effect are named: a gate such as PriorityBoost turns on Kueue's reading
    # of a label or annotation (docs/kueue-surface.yaml) that is then named, not silently ignored.
    assert mixed.ignored_fields[0].reason.endswith("apply to this controller: TopologyAwareScheduling")
    two = config({"PriorityBoost": True, "AdmissionGatedBy": False})
    assert two.ignored_fields[0].reason.endswith(": AdmissionGatedBy, PriorityBoost")


@pytest.mark.parametrize(
    ("gates", "message"),
    [
        (
            {"KueueDRAIntegrationExtendedResource": "yes"},
            "featureGates.KueueDRAIntegrationExtendedResource: Invalid value: 'yes': must be true or false",
        ),
        (
            {"DRAExtendedResources": True},
            "featureGates.DRAExtendedResources: Forbidden: deprecated and locked to false in Kueue v0.18.1; "
            "set KueueDRAIntegrationExtendedResource: true instead",
        ),
        (
            {"KueueDRAIntegrationExtendedResource": True, "KueueDRAIntegration": False},
            "featureGates.KueueDRAIntegrationExtendedResource: Invalid value: true: "
            "KueueDRAIntegrationExtendedResource requires KueueDRAIntegration to be enabled",
        ),
        ({"KueueDRAIntegration": False}, "featureGates.KueueDRAIntegration: Forbidden: not supported"),
        (
            {"AssignQueueLabelsForPods": False},
            "featureGates.AssignQueueLabelsForPods: Forbidden: not supported",
        ),
        (["KueueDRAIntegrationExtendedResource"], "featureGates: expected a map of feature gate names"),
    ],
)
def test_bad_gates_are_refused_with_the_field_named(gates: Any, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        config(gates)
    assert str(err.value).startswith(message)


def test_a_changed_gate_needs_a_restart() -> None:
    running = config({})
    new = config({"KueueDRAIntegrationExtendedResource": True})
    kept, restart = with_live_changes(running, new)
    assert kept.extended_resources is False
    assert restart == ["featureGates.KueueDRAIntegrationExtendedResource"]
