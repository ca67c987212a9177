"""The Helm chart's copies of the kustomize sources are the sources, byte for byte.

A chart cannot read files outside its directory, so manifests/helm/dra-quota-reconciler
carries copies: the CRDs (crds/), the alert rules and the Grafana dashboard (files/) and
the default configuration (values.yaml, `configuration`). What the templates render is
compared with `kustomize build` in e2e/test_helm_chart.py (it needs the built helm).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
CHART = MANIFESTS / "helm" / "dra-quota-reconciler"
COPY_HINT = "copy it again: cp {source} {copy}"


def _same(source: Path, copy: Path) -> None:
    assert copy.is_file(), COPY_HINT.format(source=source, copy=copy)
    assert copy.read_bytes() == source.read_bytes(), COPY_HINT.format(source=source, copy=copy)


def test_crds_are_the_manifests_crds() -> None:
    sources = sorted(p.name for p in (MANIFESTS / "crds").glob("*.yaml"))
    assert sources, "manifests/crds/ is empty"
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == sources
    for name in sources:
        _same(MANIFESTS / "crds" / name, CHART / "crds" / name)


@pytest.mark.parametrize("name", ["grafana-dashboard.json", "prometheusrule.yaml"])
def test_prometheus_files_are_the_add_on_files(name: str) -> None:
    _same(MANIFESTS / "prometheus" / name, CHART / "files" / name)


def test_default_configuration_is_the_manifests_configuration() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    source = MANIFESTS / "config" / "configuration.yaml"
    assert values["configuration"] == source.read_text(), f"values.yaml configuration: paste {source}"


def test_app_version_is_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert chart["appVersion"] == version
    assert chart["apiVersion"] == "v2"


def test_webhooks_are_on_by_default_and_rendered_from_the_manifests() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["webhook"] == {"enabled": True, "certManager": {"enabled": False, "issuerRef": {}}}
    template = (CHART / "templates" / "webhook.yaml").read_text()
    source = (MANIFESTS / "webhook.yaml").read_text()
    for path in ("/mutate-batch-v1-job", "/validate-kueue-x-k8s-io-v1beta2-clusterqueue"):
        assert path in source
        assert path in template
    assert template.count("- name: ") == source.count("- name: ")


def test_the_copy_check_can_fail(tmp_path: Path) -> None:
    source, copy = tmp_path / "a.yaml", tmp_path / "b.yaml"
    source.write_text("a: 1\n")
    copy.write_text("a: 2\n")
    with pytest.raises(AssertionError, match="copy it again"):
        _same(source, copy)


def test_the_chart_scrapes_as_the_add_on_does() -> None:
    """The chart's ServiceMonitor and binding mirror manifests/prometheus (what they render is
    compared in e2e/test_helm_chart.py); the values default to the add-on's subject and TLS."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())["prometheus"]
    (binding,) = [
        d
        for d in yaml.safe_load_all((MANIFESTS / "prometheus" / "metrics-reader-binding.yaml").read_text())
        if d
    ]
    ((subject),) = binding["subjects"]
    assert values["serviceAccount"] == {"name": subject["name"], "namespace": subject["namespace"]}
    assert values["serviceMonitor"]["tlsConfig"] == {"insecureSkipVerify": True}
    monitor = (CHART / "templates" / "prometheus" / "servicemonitor.yaml").read_text()
    assert "scheme: https" in monitor
    assert "bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token" in monitor
    assert (CHART / "templates" / "prometheus" / "metrics-reader-binding.yaml").is_file()
