"""The registry of integrations and `integrations.frameworks`."""

from __future__ import annotations

import pytest

from reconciler.config import ConfigError, parse_config
from reconciler.config_sections.frameworks import KNOWN_FRAMEWORKS
from reconciler.integrations import (
    BATCH_JOB,
    REGISTRATIONS,
    REGISTRY,
    Unimplemented,
    check_frameworks,
    describe_unimplemented,
    enabled,
)


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


def _unimplemented() -> list[str]:
    names = sorted(KNOWN_FRAMEWORKS - set(REGISTRATIONS))
    assert "sparkoperator.k8s.io/sparkapplication" in names  # one Kueue framework stays unimplemented
    return names


def test_an_unimplemented_kueue_framework_is_named_not_refused() -> None:
    """Kueue's own Configuration file must start the controller: each framework of Kueue's that
    this build does not implement is named with its field; the line says what that means."""
    name = _unimplemented()[0]
    found = check_frameworks(parse_config(_config(["batch/job", name])))
    assert found == [Unimplemented(1, name)]
    assert found[0].path == "integrations.frameworks[1]"
    assert describe_unimplemented(found) == (
        "integrations.frameworks enables Kueue frameworks this controller does not implement, whose "
        f"objects are not queued: {name} (integrations.frameworks[1]); implemented: "
        + ", ".join(sorted(REGISTRATIONS))
    )
    assert check_frameworks(parse_config(_config(list(REGISTRATIONS)))) == []


def test_every_unimplemented_framework_is_named_once_in_order() -> None:
    names = _unimplemented()
    found = check_frameworks(parse_config(_config(["batch/job", *names])))
    assert found == [Unimplemented(i, name) for i, name in enumerate(names, start=1)]


def test_a_name_nobody_knows_is_refused_even_past_the_configuration() -> None:
    class Bare:
        frameworks = ("batch/job", "example.com/widget")

    with pytest.raises(ConfigError) as error:
        check_frameworks(Bare())
    assert str(error.value).startswith(
        "integrations.frameworks[1]: Unsupported value: 'example.com/widget': supported values: "
    )
