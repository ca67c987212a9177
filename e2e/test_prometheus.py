"""A real Prometheus scrapes the controller during the walkthrough; the dashboard and alerts work on it.

Prometheus and promtool are Debian bookworm's (unpacked by e2e/build-binaries.sh,
never installed as a service). Prometheus runs as a child process on a free
loopback port, scrapes the controller's metrics port every second under the
job name the ServiceMonitor gives (the metrics Service's name) and loads the
PrometheusRule's groups as its rule file. It scrapes as the ServiceMonitor does:
over HTTPS (the controller's self-signed certificate not verified) with the
token of the ServiceAccount that manifests/prometheus binds to the metrics-reader
ClusterRole, which the real kube-apiserver reviews for the controller
(TokenReview, SubjectAccessReview); requests without a token, with a bad one or
with one not allowed get on /metrics are refused. While job A runs and job B waits,
PromQL sees one GPU in use and one pending workload in p3-dra-cq; afterwards
every query of the Grafana dashboard and every alert expression evaluates
without error, every rule is healthy, the controller declares every metric
they use, and no controller alert fires.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from e2e.support.deploy import ROOT, ControllerProcess, free_port, install_crds
from e2e.support.metrics_access import Scrapers, make_scrapers, remove_scrapers, scrape, wait_listening
from e2e.support.walkthrough_steps import cleanup_walkthrough, walkthrough_items_1_to_6
from e2e.testbed import KubeClient, Testbed
from e2e.testbed.paths import binary_paths
from e2e.testbed.scenario import wait_for
from tests.support.monitoring_files import (
    CONTRACT_METRICS,
    HISTOGRAMS,
    SCRAPE_JOB,
    alert_expressions,
    base_metric,
    dashboard_expressions,
    rule_groups,
)

pytestmark = [pytest.mark.testbed, pytest.mark.timeout(420)]

GPU_USAGE = 'kueue_cluster_queue_resource_usage{cluster_queue="p3-dra-cq", resource="nvidia.com/gpu"}'
# Job B, tried and not fitting, counts as inadmissible (Kueue's meaning); the sum is what the dashboard shows.
PENDING = 'sum(kueue_pending_workloads{cluster_queue="p3-dra-cq"})'
ADMITTED = 'kueue_admitted_active_workloads{cluster_queue="p3-dra-cq"}'
LEASE_NAMESPACE = "default"


@dataclass
class Prometheus:
    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


def _write_config(directory: Path, metrics_port: int, token: str) -> Path:
    rules = directory / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups()}, sort_keys=False))
    token_file = directory / "token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    config = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(rules)],
        "scrape_configs": [
            {
                "job_name": SCRAPE_JOB,
                # What the ServiceMonitor says: https, a bearer token from a file, no CA check.
                "scheme": "https",
                "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
                "tls_config": {"insecure_skip_verify": True},
                "static_configs": [
                    {
                        "targets": [f"127.0.0.1:{metrics_port}"],
                        # What the ServiceMonitor's target labels would add.
                        "labels": {"namespace": "dra-quota-system", "pod": "dra-quota-reconciler-0"},
                    }
                ],
            }
        ],
    }
    path = directory / "prometheus.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def controller(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControllerProcess]:
    """The controller with leader election (its own Lease) and a metrics port of its own."""

    async def install() -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await install_crds(kube)

    asyncio.run(install())
    directory = tmp_path_factory.mktemp("controller-prometheus")
    process = ControllerProcess(
        ROOT / "examples/walkthrough/00-configuration.yaml",
        testbed.kubeconfig,
        directory / "controller.log",
        "--leader-elect",
        "--leader-election-namespace",
        LEASE_NAMESPACE,
        "--leader-election-id",
        "dra-quota-prometheus-test",
        "--leader-election-identity",
        "dra-quota-reconciler-0",
        metrics_secure=True,
    )
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"the controller did not stop cleanly (exit {code}):\n{process.log_tail(30)}"


@pytest.fixture(scope="module")
def scrapers(testbed: Testbed) -> Iterator[Scrapers]:
    """Prometheus' ServiceAccount bound to the metrics-reader ClusterRole, and one bound to nothing."""

    async def make() -> Scrapers:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            return await make_scrapers(kube)

    async def remove(made: Scrapers) -> None:
        async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
            await remove_scrapers(kube, made)

    made = asyncio.run(make())
    yield made
    asyncio.run(remove(made))


@pytest.fixture(scope="module")
def prometheus(
    controller: ControllerProcess, scrapers: Scrapers, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    directory = tmp_path_factory.mktemp("prometheus")
    config = _write_config(directory, controller.metrics_port, scrapers.reader_token)
    port = free_port()
    log_path = directory / "prometheus.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            [
                str(binary_paths().prometheus),
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=directory,
            start_new_session=True,
        )
    server = Prometheus(f"http://127.0.0.1:{port}", process, log_path)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, f"prometheus exited:\n{server.log_tail()}"
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, f"prometheus not ready after 60s:\n{server.log_tail()}"
            time.sleep(0.2)
        yield server
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


@pytest_asyncio.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


async def query(http: aiohttp.ClientSession, prometheus: Prometheus, expr: str) -> list[dict[str, Any]]:
    """The result of an instant query; an error answer fails with Prometheus' message."""
    async with http.get(f"{prometheus.url}/api/v1/query", params={"query": expr}) as resp:
        answer = await resp.json()
    assert answer["status"] == "success", f"{expr}: {answer.get('errorType')}: {answer.get('error')}"
    result: list[dict[str, Any]] = answer["data"]["result"]
    return result


async def value_of(http: aiohttp.ClientSession, prometheus: Prometheus, expr: str) -> float | None:
    """The single sample's value, or None while there is not exactly one."""
    result = await query(http, prometheus, expr)
    return float(result[0]["value"][1]) if len(result) == 1 else None


def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": rule_groups()}, sort_keys=False))
    result = subprocess.run(
        [str(binary_paths().promtool), "check", "rules", str(rules)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    count = sum(len(g["rules"]) for g in rule_groups())
    assert f"SUCCESS: {count} rules found" in result.stdout


@pytest.mark.asyncio
async def test_walkthrough_seen_through_promql_and_the_dashboard(
    testbed: Testbed, controller: ControllerProcess, prometheus: Prometheus, http: aiohttp.ClientSession
) -> None:
    """While job A runs and job B waits: the walkthrough's numbers in PromQL, and every dashboard
    query and alert expression evaluated on that data."""
    seen: dict[str, float | None] = {}

    async def while_b_waits() -> None:
        async def equals(expr: str, expected: float) -> bool:
            seen[expr] = await value_of(http, prometheus, expr)
            return seen[expr] == expected

        # Scraped every second; a few seconds pass before the new values are in.
        await wait_for(
            "one GPU in use in p3-dra-cq, seen by Prometheus", lambda: equals(GPU_USAGE, 1), within=30
        )
        await wait_for(
            "one pending workload in p3-dra-cq, seen by Prometheus", lambda: equals(PENDING, 1), within=30
        )
        await wait_for("one admitted workload in p3-dra-cq", lambda: equals(ADMITTED, 1), within=30)
        (series,) = await query(http, prometheus, GPU_USAGE)
        assert series["metric"]["flavor"] == "p3-t4"
        assert series["metric"]["replica_role"] == "leader"
        await dashboard_and_alerts_evaluate(http, prometheus)

    async with KubeClient.from_kubeconfig(testbed.kubeconfig) as kube:
        try:
            await walkthrough_items_1_to_6(kube, while_b_waits)
        except BaseException:
            print(f"last values: {seen}\ncontroller:\n{controller.log_tail(40)}")
            print(f"prometheus:\n{prometheus.log_tail()}")
            raise
        finally:
            await cleanup_walkthrough(kube)
    assert seen == {GPU_USAGE: 1.0, PENDING: 1.0, ADMITTED: 1.0}


async def dashboard_and_alerts_evaluate(http: aiohttp.ClientSession, prometheus: Prometheus) -> None:
    for title, expr in dashboard_expressions():
        try:
            await query(http, prometheus, expr)
        except AssertionError as err:
            raise AssertionError(f"dashboard panel {title!r}: {err}") from None
    for alert, expr in alert_expressions():
        try:
            await query(http, prometheus, expr)
        except AssertionError as err:
            raise AssertionError(f"alert {alert}: {err}") from None
    # The main panel has data: p3-dra-cq's GPU in flavor p3-t4, in use, reserved and nominal.
    title, gpu_panel = dashboard_expressions()[0]
    assert title.startswith("GPU quota in use")
    result = await query(http, prometheus, gpu_panel)
    assert [(s["metric"]["cluster_queue"], s["metric"]["flavor"], s["value"][1]) for s in result] == [
        ("p3-dra-cq", "p3-t4", "1")
    ]
    # The admission wait panel has p3-dra-cq's admission of job A once rate() has two samples.
    (_, p50), *_ = [(t, e) for t, e in dashboard_expressions() if t == "Admission wait time"]

    async def has_p3_dra_cq() -> bool:
        return [s["metric"]["cluster_queue"] for s in await query(http, prometheus, p50)] == ["p3-dra-cq"]

    await wait_for("the admission wait panel to show p3-dra-cq", has_p3_dra_cq, within=30)
    # The estimated-wait panel: job A has no maximum execution time and p3-dra-cq no finished
    # workload yet, so job B is counted as a pending workload without an estimate.
    (unknown,) = [
        e for t, e in dashboard_expressions() if t.startswith("Estimated wait") and "without_estimate" in e
    ]

    async def one_without_estimate() -> bool:
        series = await query(http, prometheus, unknown)
        return [(s["metric"]["cluster_queue"], s["value"][1]) for s in series if s["value"][1] != "0"] == [
            ("p3-dra-cq", "1")
        ]

    await wait_for(
        "the estimated-wait panel to count job B without an estimate", one_without_estimate, within=30
    )


@pytest.mark.asyncio
async def test_rules_are_healthy_and_nothing_fires(
    prometheus: Prometheus, http: aiohttp.ClientSession, controller: ControllerProcess
) -> None:
    async def evaluated() -> list[dict[str, Any]] | None:
        async with http.get(f"{prometheus.url}/api/v1/rules") as resp:
            answer = await resp.json()
        rules = [r for g in answer["data"]["groups"] for r in g["rules"]]
        done = rules and all(r.get("lastEvaluation", "").startswith("2") for r in rules)
        return rules if done else None

    rules = await wait_for("every rule evaluated once", evaluated, within=30)
    assert {r["name"] for r in rules} == {a for a, _ in alert_expressions()}
    assert [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"] == []
    # The controller is up, leads, and is not in trouble: none of its alerts is pending or firing.
    await wait_for("up == 1", lambda: _up(http, prometheus), within=30)
    active = [
        r["name"] for r in rules if r["state"] != "inactive" and r["name"].startswith("DraQuotaReconciler")
    ]
    assert active == []


async def _up(http: aiohttp.ClientSession, prometheus: Prometheus) -> bool:
    return await value_of(http, prometheus, f'up{{job="{SCRAPE_JOB}"}}') == 1


@pytest.mark.asyncio
async def test_the_controller_declares_every_metric_used(
    controller: ControllerProcess, scrapers: Scrapers, http: aiohttp.ClientSession
) -> None:
    """Each metric the dashboard and alerts use is in the controller's /metrics, typed as agreed."""
    await wait_listening(http, controller.metrics_port)
    status, text = await scrape(http, controller.metrics_port, scrapers.reader_token)
    assert status == 200, text
    declared: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            declared[name + "_total" if kind == "counter" and not name.endswith("_total") else name] = kind
    missing = sorted(set(CONTRACT_METRICS) - set(declared))
    assert missing == []
    assert {name for name in CONTRACT_METRICS if declared[name] == "histogram"} == set(HISTOGRAMS)
    used = {
        base_metric(name)
        for _, expr in [*dashboard_expressions(), *alert_expressions()]
        for name in re.findall(r"\b(?:kueue|dra_quota)_[a-z0-9_]+\b", expr)
    }
    assert used <= set(declared)


@pytest.mark.asyncio
async def test_metrics_refused_without_a_token_or_the_permission(
    controller: ControllerProcess, scrapers: Scrapers, http: aiohttp.ClientSession
) -> None:
    """The real kube-apiserver's answers decide: no token or a token it does not authenticate is 401,
    an authenticated ServiceAccount not bound to the metrics-reader ClusterRole is 403, Prometheus'
    is 200; plain HTTP is not served."""
    port = controller.metrics_port
    await wait_listening(http, port)
    assert (await scrape(http, port, None))[0] == 401
    assert (await scrape(http, port, "not-a-token"))[0] == 401
    status, text = await scrape(http, port, scrapers.unbound_token)
    assert (status, text.strip()) == (
        403,
        f"Authorization denied for user system:serviceaccount:{scrapers.namespace}:metrics-nobody: "
        "get /metrics",
    )
    status, text = await scrape(http, port, scrapers.reader_token)
    assert status == 200
    assert "kueue_build_info" in text
    with pytest.raises(aiohttp.ClientError):
        async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
            await resp.read()
