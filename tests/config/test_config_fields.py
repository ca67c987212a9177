"""Kueue Configuration fields without effect here are named with the reason; those that would
change what is charged are refused; managedJobsNamespaceSelector is parsed and kept."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.api.meta import LabelSelector, LabelSelectorRequirement
from reconciler.cli import main
from reconciler.config import ConfigError, parse_config, with_live_changes


def doc(version: str = "v1beta2", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration", **fields}


def paths(version: str = "v1beta2", **fields: Any) -> list[str]:
    return [f.path for f in parse_config(doc(version, **fields)).ignored_fields]


# Every top-level field of Kueue v0.18.1's v1beta2 Configuration (apis/config/v1beta2), given.
V1BETA2_ALL: dict[str, Any] = {
    "namespace": "kueue-system",
    "webhook": {"port": 9443},
    "leaderElection": {"leaderElect": True},
    "metrics": {"bindAddress": ":8443"},
    "health": {"healthProbeBindAddress": ":8081"},
    "pprofBindAddress": ":8082",
    "controller": {"groupKindConcurrency": {"Job.batch": 5}},
    "tls": {"minVersion": "VersionTLS13"},
    "manageJobsWithoutQueueName": True,
    "managedJobsNamespaceSelector": {"matchLabels": {"team": "a"}},
    "internalCertManagement": {"enable": True},
    "waitForPodsReady": {"timeout": "5m"},
    "clientConnection": {"qps": 50, "burst": 100},
    "integrations": {"frameworks": ["batch/job"], "externalFrameworks": ["Foo.v1.example.com"]},
    "multiKueue": {"gcInterval": "1m"},
    "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare"]},
    "admissionFairSharing": {"usageHalfLifeTime": "168h", "usageSamplingInterval": "5m"},
    "resources": {"quotaCheckStrategy": "BlockUndeclared", "excludeResourcePrefixes": []},
    "featureGates": {"TopologyAwareScheduling": True},
    "objectRetentionPolicies": {"workloads": {"afterFinished": "1h"}},
    "visibilityServer": {"bindPort": 8082},
}


def test_every_v1beta2_field_is_accepted_and_each_one_without_effect_is_named_with_its_reason() -> None:
    config = parse_config(doc(**V1BETA2_ALL))
    assert [f.path for f in config.ignored_fields] == [
        "clientConnection",
        "controller",
        "featureGates",
        "health",
        "integrations.externalFrameworks",
        "leaderElection",
        "metrics",
        "multiKueue",
        "objectRetentionPolicies",
        "pprofBindAddress",
        "tls",
        "visibilityServer",
    ]
    reasons = {f.path: f.reason for f in config.ignored_fields}
    assert reasons["leaderElection"] == (
        "leader election is set on the command line (--leader-elect, --lease-duration, ...)"
    )
    assert "--metrics-bind-address" in reasons["metrics"]
    assert "runs as a MultiKueue worker only" in reasons["multiKueue"]
    assert all(len(reason) > 20 for reason in reasons.values())


def test_fields_acted_on_are_not_reported() -> None:
    handled = {k: v for k, v in V1BETA2_ALL.items() if k in {"namespace", "webhook", "resources"}}
    assert paths(**handled, waitForPodsReady={"timeout": "1m"}, deviceInventory={"mode": "Report"}) == []
    assert paths(managedJobsNamespaceSelector={"matchLabels": {"team": "a"}}) == []


def test_each_version_accepts_its_own_fields_only() -> None:
    assert paths("v1beta1", queueVisibility={"updateIntervalSeconds": 5}) == ["queueVisibility"]
    assert paths("v1beta1", tls={"minVersion": "VersionTLS12"}) == ["tls"]
    podopts = {"frameworks": ["batch/job"], "podOptions": {"namespaceSelector": {}}}
    assert paths("v1beta1", integrations=podopts) == ["integrations.podOptions"]
    with pytest.raises(ConfigError, match=r"^queueVisibility: unknown field"):
        parse_config(doc("v1beta2", queueVisibility={}))
    with pytest.raises(ConfigError, match=r"^visibilityServer: unknown field"):
        parse_config(doc("v1beta1", visibilityServer={}))
    with pytest.raises(ConfigError, match=r"^integrations\.podOptions: unknown field"):
        parse_config(doc("v1beta2", integrations=podopts))


def test_integration_fields_without_effect_are_named() -> None:
    integrations = {"labelKeysToCopy": ["team"], "externalFrameworks": ["Foo.v1.example.com"]}
    # labelKeysToCopy is acted on (tests/runtime/test_label_copy.py): not named.
    assert paths(integrations=integrations) == ["integrations.externalFrameworks"]


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        (
            {"excludeResourcePrefixes": ["example.com/"]},
            "resources.excludeResourcePrefixes: Forbidden: not supported by this controller: it would "
            "change what is charged; remove it",
        ),
        (
            {"transformations": [{"input": "nvidia.com/mig-1g.5gb", "outputs": {"example.com/gpu": "1"}}]},
            "resources.transformations: Forbidden: not supported by this controller: it would change "
            "what is charged; remove it",
        ),
        (
            {"quotaCheckStrategy": "IgnoreUndeclared"},
            "resources.quotaCheckStrategy: Forbidden: not supported by this controller: IgnoreUndeclared",
        ),
        (
            {"quotaCheckStrategy": "Lenient"},
            "resources.quotaCheckStrategy: Unsupported value: 'Lenient': supported values: "
            '"BlockUndeclared", "IgnoreUndeclared"',
        ),
        ({"transformations": "none"}, "resources.transformations: expected a list"),
    ],
)
def test_fields_that_would_change_what_is_charged_are_refused(
    resources: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(doc(resources=resources))
    assert str(err.value).startswith(message)


def test_empty_charging_fields_and_the_default_strategy_are_accepted() -> None:
    resources = {
        "excludeResourcePrefixes": [],
        "transformations": [],
        "quotaCheckStrategy": "BlockUndeclared",
    }
    assert paths(resources=resources) == []
    assert paths("v1beta1", resources={"excludeResourcePrefixes": None}) == []
    with pytest.raises(ConfigError, match=r"^resources\.excludeResourcePrefixes: Forbidden"):
        parse_config(doc("v1beta1", resources={"excludeResourcePrefixes": ["cpu"]}))


def test_managed_jobs_namespace_selector_is_parsed_and_kept() -> None:
    assert parse_config(doc()).managed_jobs_namespace_selector is None
    selector = {
        "matchLabels": {"team": "a"},
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]},
            {"key": "gpu", "operator": "Exists"},
        ],
    }
    config = parse_config(doc(managedJobsNamespaceSelector=selector))
    assert config.managed_jobs_namespace_selector == LabelSelector(
        match_labels={"team": "a"},
        match_expressions=[
            LabelSelectorRequirement("kubernetes.io/metadata.name", "NotIn", ["kube-system"]),
            LabelSelectorRequirement("gpu", "Exists", []),
        ],
    )
    changed = parse_config(doc(managedJobsNamespaceSelector={"matchLabels": {"team": "b"}}))
    _kept, restart = with_live_changes(config, changed)
    assert restart == ["managedJobsNamespaceSelector"]


@pytest.mark.parametrize(
    ("selector", "message"),
    [
        ("team=a", "managedJobsNamespaceSelector: expected a label selector"),
        ({"matchLabel": {}}, "managedJobsNamespaceSelector.matchLabel: unknown field"),
        ({"matchLabels": {"team": "a b"}}, "managedJobsNamespaceSelector.matchLabels[team]: Invalid value"),
        ({"matchLabels": {"-team": "a"}}, "managedJobsNamespaceSelector.matchLabels: Invalid value: '-team'"),
        (
            {"matchExpressions": [{"key": "team", "operator": "Has"}]},
            "managedJobsNamespaceSelector.matchExpressions[0].operator: Unsupported value: 'Has'",
        ),
        (
            {"matchExpressions": [{"key": "team", "operator": "In"}]},
            "managedJobsNamespaceSelector.matchExpressions[0].values: Required value",
        ),
        (
            {"matchExpressions": [{"key": "team", "operator": "Exists", "values": ["a"]}]},
            "managedJobsNamespaceSelector.matchExpressions[0].values: Forbidden",
        ),
        (
            {"matchExpressions": [{"operator": "Exists"}]},
            "managedJobsNamespaceSelector.matchExpressions[0].key: Invalid value: None",
        ),
    ],
)
def test_a_bad_namespace_selector_is_refused_naming_the_field(selector: object, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(doc(managedJobsNamespaceSelector=selector))
    assert str(err.value).startswith(message)


def test_kueue_counter_sources_are_refused_with_capacity_as_the_fix() -> None:
    entry = {"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"], "sources": [{"counter": {}}]}
    with pytest.raises(ConfigError) as err:
        parse_config(doc(resources={"deviceClassMappings": [entry]}))
    assert str(err.value).startswith("resources.deviceClassMappings[0].sources: Kueue's counter and capacity")
    assert "capacity: [{name: memory" in str(err.value)


def test_run_refuses_to_start_on_a_field_that_changes_charging(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(doc(resources={"excludeResourcePrefixes": ["example.com/"]})))
    assert main(["run", "--config", str(file)]) == 2
    err = capsys.readouterr().err
    assert f"error: {file}: resources.excludeResourcePrefixes: Forbidden: not supported" in err


def test_every_configuration_field_is_live_or_reported_as_needing_a_restart() -> None:
    # A field missing from both lists would change in the file, take no effect, and say nothing.
    from dataclasses import fields

    from reconciler.config import _RESTART_FIELDS, Configuration

    live = {"device_class_mappings", "ignored_fields"}  # the mappings reload; ignored ones are logged
    declared = {f.name for f in fields(Configuration) if f.init}
    assert declared - live == set(_RESTART_FIELDS)


def test_a_changed_device_inventory_mode_is_reported_as_needing_a_restart() -> None:
    config = parse_config(doc())
    changed = parse_config(doc(deviceInventory={"mode": "Enforce"}))
    _kept, restart = with_live_changes(config, changed)
    assert restart == ["deviceInventory"]
