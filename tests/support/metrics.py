"""Reading a Metrics registry the way Prometheus does."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from reconciler.observability.metrics import Metrics
from reconciler.runtime.loop.snapshot import state_snapshot
from tests.support.reconciler_harness import Harness

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def leader_metrics(h: Harness) -> Metrics:
    """A leader's metrics on the harness's reconciler, its state read from the reconciler at scrape time."""
    metrics = Metrics("leader")
    h.reconciler.metrics = metrics
    metrics.state_source = lambda: state_snapshot(h.reconciler)
    return metrics


def scrape(metrics: Metrics) -> tuple[dict[str, str], Samples]:
    """(family name -> type, (sample name, labels) -> value) of the text exposition."""
    text = metrics.render().decode()
    types: dict[str, str] = {}
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        types.setdefault(family.name, family.type)
        if family.type != types[family.name]:
            types[family.name + "#" + family.type] = family.type
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return types, samples


def value(samples: Samples, metric: str, /, **labels: str) -> float | None:
    return samples.get((metric, frozenset(labels.items())))
