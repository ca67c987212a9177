"""manifests/prometheus: the dashboard and the alert rules ask only for metrics and labels that exist.

PromQL with a misspelt metric or label is valid and quietly returns nothing, so
every metric name and label each expression uses is checked against the
metrics contract with the runtime (names, labels). That the expressions parse
and evaluate is checked against a real Prometheus in e2e/test_prometheus.py.
"""

from __future__ import annotations

import re

import pytest
import yaml

from tests.support.monitoring_files import (
    CONTRACT_METRICS,
    MONITORING,
    OTHER_METRICS,
    ROOT,
    SCRAPE_JOB,
    alert_expressions,
    all_panels,
    base_metric,
    dashboard,
    dashboard_expressions,
    rule_groups,
)

# Labels Prometheus (Operator) adds to every scraped series.
SCRAPE_LABELS = frozenset({"job", "instance", "namespace", "pod", "service", "endpoint", "container"})

_METRIC = re.compile(r"\b((?:kueue|dra_quota)_[a-z0-9_]+|up)\b(?!\s*\()")
_SELECTOR = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|on|ignoring)\s*\(([^)]*)\)")


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
    panels = list(all_panels(board["panels"]))
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
        "Estimated wait",
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


def test_prometheus_scrapes_over_https_with_its_token_and_may_read_metrics() -> None:
    """The ServiceMonitor speaks what the controller serves (HTTPS, bearer token) and the add-on
    binds the metrics-reader ClusterRole, which the base grants get on /metrics, to a ServiceAccount."""
    (monitor,) = [d for d in yaml.safe_load_all((MONITORING / "servicemonitor.yaml").read_text()) if d]
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}  # the certificate is made at start
    kustomization = yaml.safe_load((MONITORING / "kustomization.yaml").read_text())
    assert "metrics-reader-binding.yaml" in kustomization["resources"]
    (binding,) = [
        d for d in yaml.safe_load_all((MONITORING / "metrics-reader-binding.yaml").read_text()) if d
    ]
    assert binding["kind"] == "ClusterRoleBinding"
    role_ref = binding["roleRef"]
    assert (role_ref["kind"], role_ref["name"]) == ("ClusterRole", "dra-quota-reconciler-metrics-reader")
    ((kind, name, namespace),) = [(s["kind"], s["name"], s["namespace"]) for s in binding["subjects"]]
    assert kind == "ServiceAccount"
    assert name
    assert namespace
    base = [d for d in yaml.safe_load_all((ROOT / "manifests" / "rbac.yaml").read_text()) if d]
    (reader,) = [d for d in base if d["kind"] == "ClusterRole" and d["metadata"]["name"] == role_ref["name"]]
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_the_alerts_are_those_the_docs_list() -> None:
    """docs/deploy.md lists the alerts and docs/device-inventory.md the inventory's two, with their
    durations: the rules are exactly those, so a renamed or dropped alert fails here."""
    rules = {r["alert"]: r for g in rule_groups() for r in g["rules"]}
    assert sorted(rules) == sorted(
        [
            "DraQuotaReconcilerDown",  # no replica up
            "DraQuotaReconcilerNoLeader",  # no leader
            "DraQuotaReconcilerSeveralLeaders",  # or several leaders
            "DraQuotaReconcilerWatchRelistStorm",
            "DraQuotaReconcilerApiWriteErrors",
            "DraQuotaReconcilerInboxBacklog",
            "DraQuotaWorkloadsPendingTooLong",  # pending for 30 minutes without any admission
            "DraQuotaClusterQueueInactive",
            "DraQuotaGpuQuotaNearlyFull",  # over 90 % used for 30 minutes
            "DraQuotaPodsReadyTimeoutEvictions",
            "DraQuotaQuotaExceedsDevices",  # 15 minutes
            "DraQuotaDeviceClassMappingBroken",  # 10 minutes
        ]
    )
    pending = rules["DraQuotaWorkloadsPendingTooLong"]
    assert pending["for"] == "30m"
    assert "increase(kueue_admitted_workloads_total[30m])" in pending["expr"]
    full = rules["DraQuotaGpuQuotaNearlyFull"]
    assert full["for"] == "30m"
    assert full["expr"].rstrip().endswith(">= 0.9")
    assert 'reason="PodsReadyTimeout"' in rules["DraQuotaPodsReadyTimeoutEvictions"]["expr"]
    assert rules["DraQuotaQuotaExceedsDevices"]["for"] == "15m"
    assert "dra_quota_flavor_quota_over_devices" in rules["DraQuotaQuotaExceedsDevices"]["expr"]
    assert rules["DraQuotaDeviceClassMappingBroken"]["for"] == "10m"
    assert "dra_quota_device_class_mapping_problems" in rules["DraQuotaDeviceClassMappingBroken"]["expr"]
