"""manifests/prometheus: the dashboard and the alert rules ask only for metrics and labels that exist.

PromQL with a misspelt metric or label is valid and quietly returns nothing, so
every metric name and label each expression uses is checked against the
metrics contract with the runtime (names, labels). That the expressions parse
and evaluate is checked against a real Prometheus in e2e/test_prometheus.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
MONITORING = ROOT / "manifests" / "prometheus"
DASHBOARD = MONITORING / "grafana-dashboard.json"
RULES = MONITORING / "prometheusrule.yaml"
SCRAPE_JOB = "dra-quota-reconciler-metrics"  # the metrics Service's name, the ServiceMonitor's job label

_CQ = "cluster_queue"
_RESOURCE_LABELS = frozenset({"cohort", _CQ, "flavor", "resource"})
# Metric -> labels, as agreed with the runtime (every kueue_ metric also has replica_role).
CONTRACT_METRICS: dict[str, frozenset[str]] = {
    "kueue_admission_attempts_total": frozenset({"result"}),
    "kueue_admission_attempt_duration_seconds": frozenset({"result"}),
    "kueue_pending_workloads": frozenset({_CQ, "status"}),
    "kueue_reserving_active_workloads": frozenset({_CQ}),
    "kueue_admitted_active_workloads": frozenset({_CQ}),
    "kueue_quota_reserved_workloads_total": frozenset({_CQ, "priority_class"}),
    "kueue_admitted_workloads_total": frozenset({_CQ, "priority_class"}),
    "kueue_finished_workloads_total": frozenset({_CQ, "priority_class"}),
    "kueue_finished_workloads": frozenset({_CQ}),
    "kueue_evicted_workloads_total": frozenset({_CQ, "reason", "underlying_cause", "priority_class"}),
    "kueue_quota_reserved_wait_time_seconds": frozenset({_CQ, "priority_class"}),
    "kueue_admission_wait_time_seconds": frozenset({_CQ, "priority_class"}),
    "kueue_ready_wait_time_seconds": frozenset({_CQ, "priority_class"}),
    "kueue_admitted_until_ready_wait_time_seconds": frozenset({_CQ, "priority_class"}),
    "kueue_cluster_queue_status": frozenset({_CQ, "status"}),
    "kueue_cluster_queue_nominal_quota": _RESOURCE_LABELS,
    "kueue_cluster_queue_resource_reservation": _RESOURCE_LABELS,
    "kueue_cluster_queue_resource_usage": _RESOURCE_LABELS,
    "kueue_local_queue_pending_workloads": frozenset({"name", "namespace", "status"}),
    "kueue_build_info": frozenset(),
    "dra_quota_watch_restarts_total": frozenset({"kind"}),
    "dra_quota_watch_relists_total": frozenset({"kind"}),
    "dra_quota_inbox_depth": frozenset(),
    "dra_quota_api_request_duration_seconds": frozenset({"verb", "resource"}),
    "dra_quota_api_request_errors_total": frozenset({"verb", "resource", "code"}),
    "dra_quota_ledger_rebuild_seconds": frozenset(),
    "dra_quota_leader": frozenset(),
}
HISTOGRAMS = frozenset(
    {
        "kueue_admission_attempt_duration_seconds",
        "kueue_quota_reserved_wait_time_seconds",
        "kueue_admission_wait_time_seconds",
        "kueue_ready_wait_time_seconds",
        "kueue_admitted_until_ready_wait_time_seconds",
        "dra_quota_api_request_duration_seconds",
    }
)
# Labels Prometheus (Operator) adds to every scraped series.
SCRAPE_LABELS = frozenset({"job", "instance", "namespace", "pod", "service", "endpoint", "container"})
OTHER_METRICS: dict[str, frozenset[str]] = {"up": frozenset()}

# Grafana's variables, as a query would see them with every ClusterQueue selected.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$cluster_queue": ".*"}

_METRIC = re.compile(r"\b((?:kueue|dra_quota)_[a-z0-9_]+|up)\b(?!\s*\()")
_SELECTOR = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|on|ignoring)\s*\(([^)]*)\)")


def base_metric(name: str) -> str | None:
    """The contract name a series name belongs to (histogram suffixes removed), or None."""
    if name in CONTRACT_METRICS or name in OTHER_METRICS:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        stem = name.removesuffix(suffix)
        if stem != name and stem in HISTOGRAMS:
            return stem
    return None


def _labels_of(name: str) -> frozenset[str]:
    base = base_metric(name)
    assert base is not None
    labels = CONTRACT_METRICS.get(base, OTHER_METRICS.get(base, frozenset()))
    extra = {"replica_role"} if base.startswith("kueue_") else set()
    if name.endswith("_bucket"):
        extra.add("le")
    return labels | extra | SCRAPE_LABELS


def expression_problems(expr: str) -> list[str]:
    """Unknown metrics, and labels that the metric they are used with does not have."""
    problems: list[str] = []
    names = _METRIC.findall(expr)
    if not names:
        problems.append(f"no metric of this project in {expr!r}")
    for name in names:
        if base_metric(name) is None:
            problems.append(f"unknown metric {name}")
    for name, matchers in _SELECTOR.findall(expr):
        if base_metric(name) is None:
            continue
        for label in _MATCHER.findall(matchers):
            if label not in _labels_of(name):
                problems.append(f"{name} has no label {label}")
    # A grouping clause is checked against the next metric after it.
    for match in _GROUPING.finditer(expr):
        following = _METRIC.search(expr, match.end())
        if following is None or base_metric(following.group(1)) is None:
            continue
        for label in (part.strip() for part in match.group(1).split(",")):
            if label and label not in _labels_of(following.group(1)):
                problems.append(f"grouping by {label}, which {following.group(1)} does not have")
    return problems


def with_grafana_variables(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_expressions() -> list[tuple[str, str]]:
    """(panel title, PromQL with Grafana's variables filled in) of every query of the dashboard."""
    return [
        (panel["title"], with_grafana_variables(target["expr"]))
        for panel in _panels(dashboard()["panels"])
        for target in panel.get("targets", [])
    ]


def rule_groups() -> list[dict[str, Any]]:
    rule = yaml.safe_load(RULES.read_text())
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def alert_expressions() -> list[tuple[str, str]]:
    return [(r["alert"], r["expr"]) for g in rule_groups() for r in g["rules"]]


@pytest.mark.parametrize(("title", "expr"), dashboard_expressions())
def test_dashboard_queries_use_contract_metrics(title: str, expr: str) -> None:
    assert "$" not in expr, f"{title}: a Grafana variable the test does not fill in: {expr}"
    assert expression_problems(expr) == [], title


@pytest.mark.parametrize(("alert", "expr"), alert_expressions())
def test_alerts_use_contract_metrics(alert: str, expr: str) -> None:
    assert expression_problems(expr) == [], alert


@pytest.mark.parametrize(
    "expr",
    [
        "sum(kueue_pending_workload)",  # misspelt metric
        'kueue_pending_workloads{clusterqueue="a"}',  # misspelt label
        "sum by (flavor) (kueue_pending_workloads)",  # a label the metric lacks
        "histogram_quantile(0.9, rate(kueue_admission_wait_time_seconds_bucket{reason='x'}[5m]))",
        'dra_quota_leader{replica_role="leader"}',  # replica_role is only on kueue_ metrics
        "rate(node_cpu_seconds_total[5m])",  # no metric of this project at all
    ],
)
def test_the_check_can_fail(expr: str) -> None:
    assert expression_problems(expr) != []


def test_dashboard_shape() -> None:
    board = dashboard()
    assert board["uid"] == "dra-quota-reconciler"
    panels = list(_panels(board["panels"]))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    titles = " ".join(p["title"] for p in panels)
    for needed in (
        "GPU quota",
        "Pending",
        "Admitted",
        "wait time",
        "Evictions",
        "Watch",
        "API errors",
        "Inbox",
        "Leader",
    ):
        assert needed in titles
    for panel in panels:
        if panel["type"] != "row":
            assert panel["targets"], panel["title"]
            assert panel["datasource"]["uid"] == "${datasource}"
    # The admission-wait panel shows p50, p90 and p99 from the histogram.
    (wait,) = [p for p in panels if p["title"] == "Admission wait time"]
    quantiles = [re.findall(r"histogram_quantile\(([0-9.]+)", t["expr"]) for t in wait["targets"]]
    assert quantiles == [["0.5"], ["0.9"], ["0.99"]]
    # The ClusterQueue variable lists the values of a label the metric has.
    variables = {v["name"]: v for v in board["templating"]["list"]}
    match = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", variables["cluster_queue"]["definition"])
    assert match is not None
    assert match.group(2) in _labels_of(match.group(1))


def test_rules_are_annotated() -> None:
    for group in rule_groups():
        for rule in group["rules"]:
            assert rule["labels"]["severity"] in ("critical", "warning", "info"), rule["alert"]
            assert rule["annotations"]["summary"], rule["alert"]
            assert rule["annotations"]["description"], rule["alert"]
    down = next(expr for alert, expr in alert_expressions() if alert == "DraQuotaReconcilerDown")
    assert f'job="{SCRAPE_JOB}"' in down


def test_dashboard_configmap_and_service_agree() -> None:
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    (generator,) = kustomization["configMapGenerator"]
    assert generator["files"] == ["dra-quota-reconciler.json=grafana-dashboard.json"]
    assert generator["options"]["labels"] == {"grafana_dashboard": "1"}
    (service,) = [d for d in yaml.safe_load_all((ROOT / "manifests" / "service.yaml").read_text()) if d]
    assert service["metadata"]["name"] == SCRAPE_JOB
    (monitor,) = [d for d in yaml.safe_load_all((MONITORING / "servicemonitor.yaml").read_text()) if d]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] == "metrics"
    service_labels = {**service["metadata"]["labels"], "app.kubernetes.io/name": "dra-quota-reconciler"}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service_labels.items()
