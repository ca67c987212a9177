"""Configuration: both API versions, their defaults, Kueue's validation, clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.cli import main
from reconciler.config import ConfigError, load_config, parse_config, parse_duration, with_live_changes


def doc(version: str = "v1beta2", **fields: Any) -> dict[str, Any]:
    return {"apiVersion": f"config.kueue.x-k8s.io/{version}", "kind": "Configuration", **fields}


def mapping(name: str, *classes: str) -> dict[str, Any]:
    return {"name": name, "deviceClassNames": list(classes)}


def test_walkthrough_configuration() -> None:
    config = load_config(Path(__file__).resolve().parents[2] / "examples/walkthrough/00-configuration.yaml")
    assert config.class_to_resource == {"gpu.nvidia.com": "nvidia.com/gpu"}
    assert config.frameworks == ("batch/job",)


def test_v1beta2_enables_wait_for_pods_ready_by_default() -> None:
    wfpr = parse_config(doc()).wait_for_pods_ready
    assert wfpr is not None
    assert (wfpr.timeout_seconds, wfpr.block_admission, wfpr.recovery_timeout_seconds) == (1800, False, 1800)
    assert (
        wfpr.requeuing_timestamp,
        wfpr.backoff_base_seconds,
        wfpr.backoff_max_seconds,
        wfpr.backoff_limit_count,
    ) == ("Eviction", 60, 3600, None)


def test_v1beta1_needs_enable_and_has_its_own_defaults() -> None:
    assert parse_config(doc("v1beta1")).wait_for_pods_ready is None
    wfpr = parse_config(doc("v1beta1", waitForPodsReady={"enable": True})).wait_for_pods_ready
    assert wfpr is not None
    assert (wfpr.timeout_seconds, wfpr.block_admission) == (300, True)


def test_wait_for_pods_ready_fields() -> None:
    wfpr = parse_config(
        doc(
            waitForPodsReady={
                "timeout": "2m30s",
                "recoveryTimeout": "0s",
                "blockAdmission": True,
                "requeuingStrategy": {
                    "timestamp": "Creation",
                    "backoffLimitCount": 0,
                    "backoffBaseSeconds": 5,
                    "backoffMaxSeconds": 20,
                },
            }
        )
    ).wait_for_pods_ready
    assert wfpr is not None
    assert wfpr.timeout_seconds == 150
    assert wfpr.recovery_timeout_seconds is None
    assert (wfpr.backoff_limit_count, wfpr.backoff_base_seconds, wfpr.backoff_max_seconds) == (0, 5, 20)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30m", 1800), ("1h30m", 5400), ("90s", 90), ("500ms", 0.5), ("0", 0), ("1.5h", 5400)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text, "x") == seconds


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        (
            {"resources": {"deviceClassMappings": [mapping(f"r{i}", f"c{i}") for i in range(17)]}},
            r"resources\.deviceClassMappings: Too many: 17: must have at most 16 items",
        ),
        (
            {"resources": {"deviceClassMappings": [{"name": "gpu"}]}},
            r"resources\.deviceClassMappings\[0\]\.deviceClassNames: Required value: at least one "
            r"device class name is required",
        ),
        (
            {"resources": {"deviceClassMappings": [mapping("gpu", *[f"c{i}" for i in range(9)])]}},
            r"deviceClassNames: Too many: 9: must have at most 8 items",
        ),
        (
            {
                "resources": {
                    "deviceClassMappings": [mapping("a", "gpu.nvidia.com"), mapping("b", "gpu.nvidia.com")]
                }
            },
            r"deviceClassMappings\[1\]\.deviceClassNames\[0\]: Invalid value: 'gpu\.nvidia\.com': "
            r"device class already mapped to resource a",
        ),
        (
            {"resources": {"deviceClassMappings": [mapping("a", "x"), mapping("a", "y")]}},
            r"deviceClassMappings\[1\]\.name: Duplicate value",
        ),
        (
            {"resources": {"deviceClassMappings": [mapping("a", "Bad_Class")]}},
            r"deviceClassNames\[0\]: Invalid value: 'Bad_Class'",
        ),
        ({"waitForPodsReady": {"timeout": "soon"}}, r"waitForPodsReady\.timeout: 'soon' is not a duration"),
        (
            {"waitForPodsReady": {"requeuingStrategy": {"timestamp": "Later"}}},
            r"requeuingStrategy\.timestamp: Unsupported value: 'Later'",
        ),
        (
            {"waitForPodsReady": {"requeuingStrategy": {"backoffBaseSeconds": -1}}},
            r"backoffBaseSeconds: must not be negative",
        ),
        (
            {"integrations": {"frameworks": ["batch/jobs"]}},
            r"integrations\.frameworks\[0\]: Unsupported value: 'batch/jobs'",
        ),
        ({"resource": {}}, r"^resource: unknown field"),
        ({"manageJobsWithoutQueueName": "yes"}, r"manageJobsWithoutQueueName: expected true or false"),
    ],
)
def test_validation_errors_name_the_field(fields: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        parse_config(doc(**fields))


def test_wrong_api_version() -> None:
    with pytest.raises(ConfigError, match=r"apiVersion: 'kueue\.x-k8s\.io/v1beta2' is not supported"):
        parse_config({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Configuration"})


def test_cli_exits_2_on_a_bad_configuration(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "config.yaml"
    bad.write_text(yaml.safe_dump(doc(resources={"deviceClassMappings": [{"name": "gpu"}]})))
    code = main(["simulate", "--config", str(bad), "-f", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert str(bad) in err
    assert "resources.deviceClassMappings[0].deviceClassNames: Required value" in err


def test_webhook_and_certificate_defaults_are_kueues() -> None:
    config = parse_config(doc())
    assert config.namespace is None
    certs = config.internal_cert_management
    assert (certs.enable, certs.webhook_service_name, certs.webhook_secret_name) == (
        True,
        "kueue-webhook-service",
        "kueue-webhook-server-cert",
    )
    assert (config.webhook.port, config.webhook.host, config.webhook.cert_dir) == (
        9443,
        "",
        "/tmp/k8s-webhook-server/serving-certs",
    )


def test_webhook_and_certificate_fields() -> None:
    config = parse_config(
        doc(
            namespace="dra-quota-system",
            internalCertManagement={
                "enable": False,
                "webhookServiceName": "dra-quota-reconciler-webhook-service",
                "webhookSecretName": "dra-quota-reconciler-webhook-server-cert",
            },
            webhook={"port": 10443, "host": "127.0.0.1", "certDir": "/certs"},
        )
    )
    assert config.namespace == "dra-quota-system"
    assert config.internal_cert_management.enable is False
    assert config.internal_cert_management.webhook_service_name == "dra-quota-reconciler-webhook-service"
    assert config.internal_cert_management.webhook_secret_name == "dra-quota-reconciler-webhook-server-cert"
    assert (config.webhook.port, config.webhook.host, config.webhook.cert_dir) == (
        10443,
        "127.0.0.1",
        "/certs",
    )
    assert "webhook" not in [f.path for f in config.ignored_fields]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"namespace": "Kueue_System"}, "namespace: Invalid value: 'Kueue_System'"),
        (
            {"internalCertManagement": {"enable": "yes"}},
            "internalCertManagement.enable: expected true or false",
        ),
        (
            {"internalCertManagement": {"webhookServiceName": "svc.with.dots"}},
            "internalCertManagement.webhookServiceName: Invalid value",
        ),
        (
            {"internalCertManagement": {"webhookSecretName": "Secret"}},
            "internalCertManagement.webhookSecretName: Invalid value",
        ),
        ({"internalCertManagement": {"caName": "x"}}, "internalCertManagement.caName: unknown field"),
        ({"webhook": {"port": 0}}, "webhook.port: Invalid value: 0"),
        ({"webhook": {"certDir": ""}}, "webhook.certDir: Required value"),
    ],
)
def test_webhook_and_certificate_errors_name_the_field(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(doc(**fields))
    assert message in str(err.value)


def test_only_the_mappings_change_live_and_the_others_are_named() -> None:
    base = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {
            "deviceClassMappings": [{"name": "nvidia.com/gpu", "deviceClassNames": ["gpu.nvidia.com"]}]
        },
    }
    current = parse_config(base)
    changed = parse_config(
        {
            **base,
            "resources": {
                "deviceClassMappings": [{"name": "example.com/accel", "deviceClassNames": ["a.example.com"]}]
            },
            "waitForPodsReady": {"timeout": "1m"},
            "manageJobsWithoutQueueName": True,
            "fairSharing": {"preemptionStrategies": ["LessThanInitialShare"]},
        }
    )
    running, restart = with_live_changes(current, changed)
    assert running.class_to_resource == {"a.example.com": "example.com/accel"}
    assert current.class_to_resource == {"gpu.nvidia.com": "nvidia.com/gpu"}  # the old one is untouched
    assert running.wait_for_pods_ready == current.wait_for_pods_ready
    assert running.manage_jobs_without_queue_name is False
    assert restart == ["waitForPodsReady", "manageJobsWithoutQueueName", "fairSharing"]


# --- capacity: device capacities charged as quota (this controller's extension) ------------------


def with_capacity(*capacity: Any) -> dict[str, Any]:
    entry = {**mapping("example.com/mig", "mig.example.com"), "capacity": list(capacity)}
    return doc(resources={"deviceClassMappings": [mapping("example.com/gpu", "gpu.example.com"), entry]})


def test_capacity_mappings_are_parsed_per_device_class() -> None:
    config = parse_config(with_capacity({"name": "memory", "resource": "example.com/gpu-memory"}))
    assert config.class_capacities == {"mig.example.com": (("memory", "example.com/gpu-memory"),)}
    assert config.class_to_resource["mig.example.com"] == "example.com/mig"
    assert config.device_class_mappings[1].capacity[0].resource == "example.com/gpu-memory"


@pytest.mark.parametrize(
    ("capacity", "error"),
    [
        (
            [{"name": "memory", "resource": "example.com/gpu-memory"}, {"name": "cores"}],
            r"^resources\.deviceClassMappings\[1\]\.capacity\[1\]\.resource: Required value: name the quota "
            r"resource the capacity is charged as, e\.g\. example\.com/gpu-memory$",
        ),
        (
            [{"resource": "example.com/gpu-memory"}],
            r"^resources\.deviceClassMappings\[1\]\.capacity\[0\]\.name: Required value: name the device "
            r"capacity to charge",
        ),
        (
            [{"name": "memory", "resource": "Not A Name"}],
            r"^resources\.deviceClassMappings\[1\]\.capacity\[0\]\.resource: Invalid value: 'Not A Name': "
            r"must be a qualified name",
        ),
        (
            [{"name": "memory", "resource": "example.com/gpu"}],
            r"^resources\.deviceClassMappings\[1\]\.capacity\[0\]\.resource: Invalid value: "
            r"'example\.com/gpu': already the device count resource of resources\.deviceClassMappings\[0\]"
            r"\.name; charge the capacity as a resource of its own",
        ),
        (
            [{"name": "memory", "resource": "a.com/x"}, {"name": "memory", "resource": "a.com/y"}],
            r"^resources\.deviceClassMappings\[1\]\.capacity\[1\]\.name: Duplicate value: 'memory'",
        ),
        (
            [{"name": "memory", "resource": "a.com/x", "unit": "Gi"}],
            r"^resources\.deviceClassMappings\[1\]\.capacity\[0\]\.unit: unknown field; known fields here "
            r"are: name, resource$",
        ),
        (
            {"name": "memory"},
            r"^resources\.deviceClassMappings\[1\]\.capacity: expected a list of \{name, resource\}",
        ),
    ],
)
def test_bad_capacity_mappings_name_the_field_and_the_fix(capacity: Any, error: str) -> None:
    body = with_capacity()
    body["resources"]["deviceClassMappings"][1]["capacity"] = capacity
    with pytest.raises(ConfigError, match=error):
        parse_config(body)


def test_capacity_mappings_reload_live() -> None:
    before = parse_config(with_capacity())
    after = parse_config(with_capacity({"name": "memory", "resource": "example.com/gpu-memory"}))
    merged, restart = with_live_changes(before, after)
    assert restart == []
    assert merged.class_capacities == {"mig.example.com": (("memory", "example.com/gpu-memory"),)}
