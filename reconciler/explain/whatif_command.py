"""`reconciler explain --what-if FILE --config CONFIG`: the dry run against the live cluster."""

from __future__ import annotations

import argparse
import asyncio
import sys

from reconciler.api.times import now_rfc3339
from reconciler.config import ConfigError, Configuration, load_config, named
from reconciler.integrations import check_frameworks
from reconciler.kube import ConfigError as KubeConfigError
from reconciler.kube import KubeClient, KubeError
from reconciler.simulate import (
    InputError,
    InputObject,
    SimulationError,
    collect_objects,
    render_what_if,
    settings_of,
    what_if,
)

from .snapshot import fetch_snapshot

__all__ = ["run_what_if"]

EXIT_UNREADABLE = 1
EXIT_USAGE = 2


async def _snapshot(args: argparse.Namespace, config: Configuration) -> tuple[list[InputObject], list[str]]:
    client = await KubeClient.from_kubeconfig(args.kubeconfig)
    async with client:
        return await fetch_snapshot(
            client,
            request_timeout=args.request_timeout,
            inventory=config.device_inventory.enabled,
            frameworks=config.frameworks,
        )


def run_what_if(args: argparse.Namespace) -> int:
    if args.config is None:
        print(
            "error: --what-if needs --config FILE: the controller's Configuration (its "
            "deviceClassMappings and integrations.frameworks decide what is charged)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        config = load_config(args.config)
        check_frameworks(config)
        asked = collect_objects([args.what_if])
    except (ConfigError, InputError) as err:
        problem = named(args.config, err) if isinstance(err, ConfigError) else str(err)
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        snapshot, unreadable = asyncio.run(_snapshot(args, config))
    except KubeConfigError as err:
        print(f"error: kubeconfig: {err} (give --kubeconfig FILE or set KUBECONFIG)", file=sys.stderr)
        return EXIT_UNREADABLE
    except KubeError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_UNREADABLE
    try:
        verdicts, warnings = what_if(snapshot, asked, settings_of(config), now_rfc3339())
    except SimulationError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    warnings = [f"not read, the answer may be incomplete: {u}" for u in unreadable] + warnings
    sys.stdout.write(render_what_if(verdicts, warnings, args.output))
    return 0
