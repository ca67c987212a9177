"""Command line: `reconciler run | simulate | version`."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from .config import ConfigError, load_config
from .simulate import InputError, SimulationError, render, run_simulation

EXIT_USAGE = 2


def _version() -> str:
    try:
        return version("dra-quota-reconciler")
    except PackageNotFoundError:
        return "0+unknown"


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
    run.add_argument("--config", required=True, help="Kueue Configuration file")
    run.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)"
    )
    run.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    run.add_argument("--log-format", choices=("json", "console"), help="default: console on a terminal")
    run.add_argument("--write-concurrency", type=int, default=32, help="concurrent API writes (default 32)")
    sim = sub.add_parser(
        "simulate",
        help="admit manifests offline and print the resulting Workloads and ClusterQueues",
        description=(
            "Reads Kueue objects, ResourceClaimTemplates, DeviceClasses, Jobs and Workloads, "
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
    sub.add_parser("version", help="print the version")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "version":
        print(_version())
        return 0
    if args.command == "run":
        return _run(args)
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
    from .observability.logging import configure_logging
    from .runtime.controller import ControllerOptions, run_controller

    try:
        config = load_config(args.config)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(args.log_level, json=None if args.log_format is None else args.log_format == "json")
    options = ControllerOptions(kubeconfig=args.kubeconfig, write_concurrency=args.write_concurrency)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_controller(config, options))
    return 0


if __name__ == "__main__":
    sys.exit(main())
