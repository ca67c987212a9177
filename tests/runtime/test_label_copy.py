"""integrations.labelKeysToCopy: the named labels of a job are copied to the Workload made for it
(those the job has), as Kueue copies them; a key that is not a label key is a field error."""

from __future__ import annotations

import dataclasses

import pytest

from reconciler.api import Job
from reconciler.config import ConfigError, parse_config
from reconciler.config_sections.ignored import ignored_fields
from tests.support.builders import job_body
from tests.support.reconciler_harness import CONFIG, Harness, decode, queues, submitted

KEYS = ["team", "example.com/cost-center"]


def _config(integrations: dict[str, object]) -> dict[str, object]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "integrations": integrations,
    }


def test_the_keys_are_read_and_no_longer_named_as_without_effect() -> None:
    doc = _config({"frameworks": ["batch/job"], "labelKeysToCopy": KEYS})
    assert parse_config(doc).label_keys_to_copy == tuple(KEYS)
    assert [f.path for f in ignored_fields(doc, "v1beta2")] == []


def test_a_key_that_is_not_a_label_key_is_refused_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"integrations\.labelKeysToCopy\[1\]: Invalid value: 'not a key'"):
        parse_config(_config({"labelKeysToCopy": ["team", "not a key"]}))


def test_the_workload_carries_the_jobs_labels_named_and_only_those() -> None:
    h = Harness(dataclasses.replace(CONFIG, label_keys_to_copy=tuple(KEYS)))
    queues(h)
    h.sync_all()
    body = job_body("a", requests={"nvidia.com/gpu": "1"})
    body["metadata"]["labels"].update({"team": "vision", "other": "x"})
    workload = submitted(h, decode(body, Job))
    labels = workload.metadata.labels
    assert labels["team"] == "vision"
    assert "other" not in labels
    assert "example.com/cost-center" not in labels  # the job does not have it
