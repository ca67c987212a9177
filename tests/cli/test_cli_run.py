"""`reconciler run` flags: durations, bind addresses, leader-election defaults and validation."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from reconciler import cli

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "walkthrough" / "00-configuration.yaml"


@pytest.mark.parametrize(
    ("text", "seconds"), [("15s", 15.0), ("500ms", 0.5), ("1m30s", 90.0), ("2", 2.0), ("0.5s", 0.5)]
)
def test_durations(text: str, seconds: float) -> None:
    assert cli.duration(text) == seconds


@pytest.mark.parametrize("text", ["", "15x", "s", "-1s", "0", "1s2"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        cli.duration(text)


def test_election_defaults_follow_the_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "ops")
    monkeypatch.setenv("POD_NAME", "reconciler-7d9f-abcde")
    assert cli.default_election_namespace() == "ops"
    assert cli.default_election_identity() == "reconciler-7d9f-abcde"
    monkeypatch.delenv("POD_NAMESPACE")
    monkeypatch.delenv("POD_NAME")
    monkeypatch.setattr(cli, "SERVICE_ACCOUNT_NAMESPACE", "/nonexistent/namespace")
    assert cli.default_election_namespace() == "kueue-system"
    first, second = cli.default_election_identity(), cli.default_election_identity()
    assert first != second  # hostname_<random>
    assert first.split("_")[0] == second.split("_")[0]


def test_inconsistent_lease_timing_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(
        [
            "run",
            "--config",
            str(CONFIG),
            "--leader-elect",
            "--lease-duration",
            "5s",
            "--renew-deadline",
            "10s",
        ]
    )
    assert code == cli.EXIT_USAGE
    assert "lease duration must be greater than the renew deadline" in capsys.readouterr().err


def test_an_unloadable_kubeconfig_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Logging set up for the run would write to this test's captured stdout after it is gone.
    monkeypatch.setattr("reconciler.observability.logging.configure_logging", lambda *_, **__: None)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    off = ["--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--webhook-bind-address", "0"]
    code = cli.main(["run", "--config", str(CONFIG), "--kubeconfig", str(tmp_path / "absent"), *off])
    assert code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert f"error: kubeconfig: cannot load kubeconfig {tmp_path / 'absent'}" in err
    assert "Traceback" not in err


def test_bad_bind_address_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", "--config", str(CONFIG), "--metrics-bind-address", "8080"])
    assert exited.value.code == 2
    assert "bind address" in capsys.readouterr().err


def test_webhook_options_from_the_configuration_and_the_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    from reconciler.config import load_config, parse_config

    monkeypatch.setenv("POD_NAMESPACE", "ops")
    parser = cli._parser()
    config = load_config(CONFIG)
    defaults = cli._webhook_options(config, parser.parse_args(["run", "--config", str(CONFIG)]))
    assert defaults is not None
    assert (defaults.host, defaults.port, str(defaults.cert_dir)) == (
        None,
        9443,
        "/tmp/k8s-webhook-server/serving-certs",
    )
    assert (defaults.namespace, defaults.extra_hosts) == ("ops", ())
    flags = [
        "run",
        "--config",
        str(CONFIG),
        "--webhook-bind-address",
        "127.0.0.1:10443",
        "--webhook-cert-dir",
        "/certs",
        "--webhook-cert-extra-sans",
        "127.0.0.1, localhost",
    ]
    own = parse_config({**config_document(), "namespace": "dra-quota-system"})
    options = cli._webhook_options(own, parser.parse_args(flags))
    assert options is not None
    assert (options.host, options.port, str(options.cert_dir)) == ("127.0.0.1", 10443, "/certs")
    assert (options.namespace, options.extra_hosts) == ("dra-quota-system", ("127.0.0.1", "localhost"))
    off = parser.parse_args(["run", "--config", str(CONFIG), "--webhook-bind-address", "0"])
    assert cli._webhook_options(config, off) is None


def config_document() -> dict[str, object]:
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}


def test_the_flag_defaults_are_those_docs_metrics_lists() -> None:
    args = cli._parser().parse_args(["run", "--config", str(CONFIG)])
    assert (args.metrics_bind_address, args.metrics_secure, args.metrics_cert_dir) == (":8080", True, None)
    assert args.health_probe_bind_address == ":8081"
    assert (args.leader_elect, args.leader_election_id) == (False, "dra-quota-reconciler")
    assert (args.lease_duration, args.renew_deadline, args.retry_period) == (15.0, 10.0, 2.0)
    assert args.write_concurrency == 32  # docs/benchmarks.md: "only 32 writes in flight"
    assert args.config_reload_interval == 2.0  # docs/dra.md: "--config-reload-interval (2 s)"


def test_parked_workloads_are_retried_after_kueues_second_unless_told_otherwise() -> None:
    args = cli._parser().parse_args(["run", "--config", str(CONFIG)])
    assert args.retry_parked_after == 1.0  # docs/scheduling.md: "tried again 1 s after quota moves"
    args = cli._parser().parse_args(["run", "--config", str(CONFIG), "--retry-parked-after", "0"])
    assert args.retry_parked_after == 0.0
    args = cli._parser().parse_args(["run", "--config", str(CONFIG), "--retry-parked-after", "250ms"])
    assert args.retry_parked_after == 0.25
