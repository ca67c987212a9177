"""Command line: `reconciler simulate | version`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

from .config import ConfigError
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
    try:
        result = run_simulation(args.config, args.paths)
    except (ConfigError, InputError, SimulationError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    sys.stdout.write(render(result, args.output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
