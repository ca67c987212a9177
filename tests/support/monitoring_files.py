"""manifests/prometheus as the monitoring tests read it: the metrics contract with the runtime,
the Grafana dashboard's queries and the PrometheusRule's alerts.

Shared by tests/project/test_monitoring_files.py (static checks) and e2e/test_prometheus.py (a real
Prometheus evaluating them).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
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
    "dra_quota_device_class_requested_devices": frozenset({"device_class", "status"}),
    "dra_quota_device_class_claims": frozenset({"device_class", "status"}),
    "dra_quota_device_class_unmapped_workloads": frozenset({"device_class"}),
    "dra_quota_config_reload_total": frozenset({"result"}),
    "dra_quota_config_generation": frozenset(),
    "dra_quota_config_info": frozenset({"hash"}),
    "dra_quota_flavor_quota_over_devices": frozenset({_CQ, "flavor", "resource"}),
    "dra_quota_device_class_mapping_problems": frozenset({"device_class", "problem"}),
    "dra_quota_pending_workloads_estimated_wait_seconds": frozenset({_CQ, "workload"}),
    "dra_quota_pending_workloads_without_estimate": frozenset({_CQ}),
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
OTHER_METRICS: dict[str, frozenset[str]] = {"up": frozenset()}

# Grafana's variables, as a query would see them with every ClusterQueue selected.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "15s", "$cluster_queue": ".*"}


def base_metric(name: str) -> str | None:
    """The contract name a series name belongs to (histogram suffixes removed), or None."""
    if name in CONTRACT_METRICS or name in OTHER_METRICS:
        return name
    for suffix in ("_bucket", "_sum", "_count"):
        stem = name.removesuffix(suffix)
        if stem != name and stem in HISTOGRAMS:
            return stem
    return None


def with_grafana_variables(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def all_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def dashboard_expressions() -> list[tuple[str, str]]:
    """(panel title, PromQL with Grafana's variables filled in) of every query of the dashboard."""
    return [
        (panel["title"], with_grafana_variables(target["expr"]))
        for panel in all_panels(dashboard()["panels"])
        for target in panel.get("targets", [])
    ]


def rule_groups() -> list[dict[str, Any]]:
    rule = yaml.safe_load(RULES.read_text())
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups


def alert_expressions() -> list[tuple[str, str]]:
    return [(r["alert"], r["expr"]) for g in rule_groups() for r in g["rules"]]
