"""The registry of integrations and `integrations.frameworks`."""

from __future__ import annotations

import pytest

from reconciler.config import ConfigError, parse_config
from reconciler.config_sections.frameworks import KNOWN_FRAMEWORKS
from reconciler.integrations import BATCH_JOB, REGISTRATIONS, REGISTRY, check_frameworks, enabled


def _config(frameworks: list[str]) -> dict[str, object]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": {"frameworks": frameworks},
    }


def test_every_registered_framework_is_one_of_kueues_and_is_accepted() -> None:
    assert set(REGISTRY) <= set(REGISTRATIONS) <= KNOWN_FRAMEWORKS
    config = parse_config(_config(list(REGISTRY)))
    check_frameworks(config)
    assert enabled(parse_config(_config(["batch/job"])).frameworks) == [BATCH_JOB]


def test_a_name_kueue_does_not_know_is_a_field_error_of_the_configuration() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(_config(["batch/job", "foo"]))
    assert str(error.value).startswith(
        "integrations.frameworks[1]: Unsupported value: 'foo': supported values: "
        '"batch/job", "deployment", "jobset.x-k8s.io/jobset", '
    )


def test_an_unimplemented_framework_is_refused_naming_the_implemented_ones() -> None:
    with pytest.raises(ConfigError) as error:
        check_frameworks(parse_config(_config(["ray.io/raycluster"])))
    assert str(error.value) == (
        "integrations.frameworks[0]: Unsupported value: 'ray.io/raycluster': supported values: "
        '"batch/job", "deployment", "jobset.x-k8s.io/jobset", '
        '"leaderworkerset.x-k8s.io/leaderworkerset", "pod", "statefulset" '
        "(Kueue's 'ray.io/raycluster' integration is not implemented yet)"
    )


@pytest.mark.parametrize(
    "name",
    [
        "kubeflow.org/pytorchjob",
        "ray.io/rayjob",
        "workload.codeflare.dev/appwrapper",
    ],
)
def test_kueue_frameworks_not_implemented_here_are_refused_naming_the_field(name: str) -> None:
    with pytest.raises(ConfigError) as error:
        check_frameworks(parse_config(_config(["batch/job", name])))
    assert str(error.value).startswith(f"integrations.frameworks[1]: Unsupported value: {name!r}")
    assert str(error.value).endswith(f"(Kueue's {name!r} integration is not implemented yet)")
