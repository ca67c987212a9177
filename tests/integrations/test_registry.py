"""The registry of integrations and `integrations.frameworks`."""

from __future__ import annotations

import pytest
from reconciler.config import SUPPORTED_FRAMEWORKS
from reconciler.config import ConfigError
from reconciler.config import parse_config
from reconciler.integrations import BATCH_JOB
from reconciler.integrations import REGISTRY
from reconciler.integrations import enabled


def _config(frameworks: list[str]) -> dict[str, object]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": {"frameworks": frameworks},
    }


def test_the_configuration_accepts_exactly_the_registered_frameworks() -> None:
    assert set(REGISTRY) == SUPPORTED_FRAMEWORKS
    assert enabled(parse_config(_config(["batch/job"])).frameworks) == [BATCH_JOB]


@pytest.mark.parametrize(
    ("frameworks", "message"),
    [
        (
            ["batch/job", "foo"],
            "integrations.frameworks[1]: Unsupported value: 'foo': supported values: "
            '"batch/job", "jobset.x-k8s.io/jobset", "leaderworkerset.x-k8s.io/leaderworkerset", "pod"',
        ),
        (
            ["deployment"],
            "integrations.frameworks[0]: Unsupported value: 'deployment': supported values: "
            '"batch/job", "jobset.x-k8s.io/jobset", "leaderworkerset.x-k8s.io/leaderworkerset", "pod" '
            "(Kueue's 'deployment' integration is not implemented yet)",
        ),
    ],
)
def test_an_unknown_or_unimplemented_framework_is_a_field_error(frameworks: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(_config(frameworks))
    assert str(error.value) == message


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
        parse_config(_config(["batch/job", name]))
    assert str(error.value).startswith(f"integrations.frameworks[1]: Unsupported value: {name!r}")
    assert str(error.value).endswith(f"(Kueue's {name!r} integration is not implemented yet)")
