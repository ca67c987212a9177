"""Command line: `reconciler run | simulate | explain | version`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import re
import socket
import sys
import uuid
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from .config import ConfigError, Configuration, load_config, named
from .integrations import check_frameworks
from .simulate import InputError, SimulationError, render, run_simulation

if TYPE_CHECKING:
    from .observability.tls import ServingCertificate
    from .visibility.dryrun import DryRunner
    from .webhook.service import WebhookOptions

EXIT_USAGE = 2
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """Seconds from a Go-style duration (``15s``, ``500ms``, ``1m30s``) or a plain number of seconds."""
    text = text.strip()
    try:
        seconds = float(text)
    except ValueError:
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 15s, 500ms, 1m)") from None
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"a duration must be positive: {text!r}")
    return seconds


def duration_or_zero(text: str) -> float:
    """As `duration`, or 0 (``0``, ``0s``) for none."""
    return 0.0 if text.strip() in ("0", "0s", "0ms") else duration(text)


def _bind_address(text: str) -> str:
    from .observability.server import parse_bind_address

    try:
        parse_bind_address(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _boolean(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"not true or false: {text!r}")


def default_election_namespace() -> str:
    """$POD_NAMESPACE, else the in-cluster service-account namespace, else kueue-system."""
    if os.environ.get("POD_NAMESPACE"):
        return os.environ["POD_NAMESPACE"]
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as f:
            namespace = f.read().strip()
        if namespace:
            return namespace
    except OSError:
        pass
    return "kueue-system"


def default_election_identity() -> str:
    """$POD_NAME, else hostname + '_' + a random suffix."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{uuid.uuid4()}"


def _version() -> str:
    try:
        return version("dra-quota-reconciler")
    except PackageNotFoundError:
        return "0+unknown"


def _add_metrics_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--metrics-bind-address",
        type=_bind_address,
        default=":8080",
        help="HOST:PORT serving /metrics (':PORT' = all interfaces, '0' disables; default :8080)",
    )
    run.add_argument(
        "--metrics-secure",
        type=_boolean,
        default=True,
        metavar="true|false",
        help="serve /metrics over HTTPS to bearer tokens the API server authenticates (TokenReview) "
        "and authorizes for get on /metrics (SubjectAccessReview); false serves plain HTTP, allowed "
        "only with a loopback --metrics-bind-address (default true)",
    )
    run.add_argument(
        "--metrics-cert-dir",
        help="directory with the metrics server's tls.crt and tls.key (default: a self-signed "
        "certificate made at start)",
    )


def _add_visibility_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--visibility-bind-address",
        type=_bind_address,
        default=":8082",
        help="HOST:PORT serving Kueue's visibility API (visibility.kueue.x-k8s.io, pending workloads) "
        "over HTTPS to the API server's front proxy ('0' disables; default :8082, Kueue's port)",
    )
    run.add_argument(
        "--visibility-cert-dir",
        help="directory with the visibility server's tls.crt and tls.key (default: a self-signed "
        "certificate made at start, as Kueue's APIService skips verifying it)",
    )


def _add_election_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--leader-elect",
        action="store_true",
        help="elect a leader through a Lease; only the leader decides and writes",
    )
    run.add_argument(
        "--leader-election-namespace",
        help="namespace of the Lease (default: $POD_NAMESPACE, the service account's, else kueue-system)",
    )
    run.add_argument(
        "--leader-election-id", default="dra-quota-reconciler", help="name of the Lease (default %(default)s)"
    )
    run.add_argument(
        "--leader-election-identity",
        help="this replica's identity (default: $POD_NAME, else hostname_<random>)",
    )
    run.add_argument("--lease-duration", type=duration, default=15.0, help="how long a lease is held (15s)")
    run.add_argument(
        "--renew-deadline",
        type=duration,
        default=10.0,
        help="the leader gives up after this without renewal (10s)",
    )
    run.add_argument("--retry-period", type=duration, default=2.0, help="between lease attempts (2s)")


def _add_webhook_arguments(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--webhook-bind-address",
        type=_bind_address,
        help="HOST:PORT serving the admission webhooks over HTTPS ('0' disables; "
        "default: the Configuration's webhook.host and webhook.port, :9443)",
    )
    run.add_argument(
        "--webhook-cert-dir",
        help="directory with the webhook's tls.crt and tls.key (written there with "
        "internalCertManagement; default: the Configuration's webhook.certDir, "
        "/tmp/k8s-webhook-server/serving-certs)",
    )
    run.add_argument(
        "--webhook-cert-extra-sans",
        default="",
        help="comma-separated extra host names or IP addresses for the internally managed serving "
        "certificate (besides <webhookServiceName>.<namespace>.svc), e.g. 127.0.0.1",
    )


def _add_simulate_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = sub.add_parser(
        "simulate",
        help="admit manifests offline and print the resulting Workloads and ClusterQueues",
        description=(
            "Reads Kueue objects, ResourceClaimTemplates, ResourceClaims (shared claims), DeviceClasses, "
            "Jobs and Workloads, "
            "admits them in creation order (file order for objects without a "
            "creationTimestamp) and prints what the API would show."
        ),
    )
    sim.add_argument("--config", required=True, help="Kueue Configuration file")
    sim.add_argument(
        "-f",
        "--filename",
        dest="paths",
        action="append",
        required=True,
        help="manifest file or directory (repeatable)",
    )
    sim.add_argument("-o", "--output", choices=("yaml", "json", "table"), default="yaml")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reconciler",
        description="Kueue-compatible quota reconciler for GPUs requested through DRA.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser(
        "run",
        help="run the controller against a cluster",
        description="Watches Jobs and Kueue objects and admits Workloads against ClusterQueue quota.",
    )
    run.add_argument(
        "--config",
        required=True,
        help="Kueue Configuration file; its deviceClassMappings are reloaded live when it changes",
    )
    run.add_argument(
        "--config-reload-interval",
        type=duration,
        default=2.0,
        help="how often the Configuration file is checked for changes (default 2s)",
    )
    run.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)"
    )
    run.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    run.add_argument("--log-format", choices=("json", "console"), help="default: console on a terminal")
    run.add_argument("--write-concurrency", type=int, default=32, help="concurrent API writes (default 32)")
    run.add_argument(
        "--retry-parked-after",
        type=duration_or_zero,
        default=1.0,
        help="wait before workloads that did not fit are tried again once quota moves (default 1s, "
        "Kueue's batch period; 0 tries them at once)",
    )
    _add_metrics_arguments(run)
    run.add_argument(
        "--health-probe-bind-address",
        type=_bind_address,
        default=":8081",
        help="HOST:PORT serving /healthz and /readyz ('0' disables; default :8081)",
    )
    _add_visibility_arguments(run)
    _add_election_arguments(run)
    _add_webhook_arguments(run)
    _add_simulate_parser(sub)
    from .explain.command import add_parser as add_explain_parser

    add_explain_parser(sub)
    sub.add_parser("version", help="print the version")
    manifests = sub.add_parser(
        "manifests",
        help="write the generated parts of manifests/ (RBAC rules, webhooks) from the registered kinds",
    )
    manifests.add_argument(
        "--root", default=".", help="the repository's root (default: the current directory)"
    )
    manifests.add_argument("--check", action="store_true", help="only say which files differ (exit 1 if any)")
    return parser


def _manifests(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .generated import write

    stale = write(Path(args.root), check=args.check)
    for path in stale:
        verb = "differs from what the registry generates" if args.check else "written"
        print(f"{path}: {verb}", file=sys.stderr)
    if args.check and stale:
        print("run `reconciler manifests` to write them", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "version":
        print(_version())
        return 0
    if args.command == "run":
        return _run(args)
    if args.command == "manifests":
        return _manifests(args)
    if args.command == "explain":
        from .explain.command import run as run_explain

        return run_explain(args)
    try:
        result = run_simulation(args.config, args.paths)
    except (ConfigError, InputError, SimulationError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    sys.stdout.write(render(result, args.output))
    return 0


def _run(args: argparse.Namespace) -> int:
    from .kube.errors import ConfigError as KubeConfigError
    from .kube.leader import ElectionConfig
    from .observability.logging import configure_logging
    from .runtime.loop.controller import ControllerOptions
    from .runtime.loop.supervisor import ProcessOptions, run_process

    try:
        config = load_config(args.config)
        check_frameworks(config)
    except ConfigError as err:
        print(f"error: {named(args.config, err)}", file=sys.stderr)
        return EXIT_USAGE
    election = None
    if args.leader_elect:
        try:
            election = ElectionConfig(
                namespace=args.leader_election_namespace or default_election_namespace(),
                name=args.leader_election_id,
                identity=args.leader_election_identity or default_election_identity(),
                lease_duration=args.lease_duration,
                renew_deadline=args.renew_deadline,
                retry_period=args.retry_period,
            )
        except ValueError as err:
            print(f"error: leader election: {err}", file=sys.stderr)
            return EXIT_USAGE
    try:
        metrics_tls = _metrics_tls(args)
        visibility_tls = _serving_tls(
            args.visibility_bind_address, args.visibility_cert_dir, "--visibility-cert-dir"
        )
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(args.log_level, json=None if args.log_format is None else args.log_format == "json")
    options = ProcessOptions(
        controller=ControllerOptions(
            kubeconfig=args.kubeconfig,
            write_concurrency=args.write_concurrency,
            config_path=args.config,
            config_reload_interval=args.config_reload_interval,
            namespace=config.namespace or default_election_namespace(),
            retry_parked_after=args.retry_parked_after,
        ),
        metrics_bind_address=args.metrics_bind_address,
        metrics_tls=metrics_tls,
        health_bind_address=args.health_probe_bind_address,
        leader_election=election,
        version=_version(),
        webhook=_webhook_options(config, args),
        visibility_bind_address=args.visibility_bind_address,
        visibility_tls=visibility_tls,
        dry_run=_dry_runner(config, args),
    )
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(run_process(config, options))
    except KubeConfigError as err:
        hint = "" if args.kubeconfig else " (give --kubeconfig FILE or set KUBECONFIG)"
        print(f"error: kubeconfig: {err}{hint}", file=sys.stderr)
        return EXIT_USAGE
    return 0


def _dry_runner(config: Configuration, args: argparse.Namespace) -> DryRunner:
    """The visibility server's dry run (`POST .../whatifs`), read with the controller's client."""
    from .explain.dry_run_service import dry_runner
    from .runtime.loop.controller import make_client

    return dry_runner(config, args.config, lambda: make_client(args.kubeconfig))


def _metrics_tls(args: argparse.Namespace) -> ServingCertificate | None:
    """The metrics server's certificate; None for plain HTTP (--metrics-secure=false, loopback only)."""
    from .observability.server import is_loopback, parse_bind_address

    bind = parse_bind_address(args.metrics_bind_address)
    if not args.metrics_secure:
        if bind is not None and not is_loopback(bind[0]):
            raise ValueError(
                f"--metrics-secure=false serves /metrics without TLS or authentication, so only on a "
                f"loopback address, not --metrics-bind-address {args.metrics_bind_address}: bind "
                "127.0.0.1:PORT (or [::1]:PORT), or drop --metrics-secure=false"
            )
        return None
    return _serving_tls(args.metrics_bind_address, args.metrics_cert_dir, "--metrics-cert-dir")


def _serving_tls(address: str, cert_dir: str | None, flag: str) -> ServingCertificate | None:
    """A server's certificate: tls.crt and tls.key of ``cert_dir``, else self-signed; None when
    ``address`` is '0' (no server)."""
    from .observability.server import parse_bind_address
    from .observability.tls import CertificateFiles, ServingCertificate, context_from_pem
    from .webhook.certs import new_bundle

    if parse_bind_address(address) is None:
        return None
    if cert_dir:
        directory = Path(cert_dir)
        try:
            return CertificateFiles(directory / "tls.crt", directory / "tls.key")
        except ValueError as err:
            raise ValueError(f"{flag}: {err}") from None
    hosts = ["localhost", "127.0.0.1", socket.gethostname()]
    bundle = new_bundle(hosts, dt.datetime.now(dt.UTC))
    return ServingCertificate(
        context_from_pem(bundle.serving.cert_pem + bundle.ca.cert_pem, bundle.serving.key_pem)
    )


def _webhook_options(config: Configuration, args: argparse.Namespace) -> WebhookOptions | None:
    from .observability.server import parse_bind_address
    from .webhook.service import WebhookOptions

    address = args.webhook_bind_address or f"{config.webhook.host}:{config.webhook.port}"
    bind = parse_bind_address(address)
    if bind is None:
        return None
    return WebhookOptions(
        host=bind[0],
        port=bind[1],
        cert_dir=Path(args.webhook_cert_dir or config.webhook.cert_dir),
        namespace=config.namespace or default_election_namespace(),
        extra_hosts=tuple(h.strip() for h in args.webhook_cert_extra_sans.split(",") if h.strip()),
    )


if __name__ == "__main__":
    sys.exit(main())
