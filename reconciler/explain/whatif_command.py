"""`reconciler explain --what-if FILE --config CONFIG`: the dry run against the live cluster."""

from __future__ import annotations

import argparse
import asyncio
import sys

from reconciler.api.times import now_rfc3339
from reconciler.config import ConfigError, Configuration, load_config, named
from reconciler.core.queueing.admission_fair_sharing import AfsSettings
from reconciler.integrations import check_frameworks
from reconciler.kube import ConfigError as KubeConfigError
from reconciler.kube import KubeClient, KubeError
from reconciler.simulate import (
    FairSharing,
    InputError,
    InputObject,
    SimulationError,
    WhatIfSettings,
    collect_objects,
    render_what_if,
    what_if,
)

from .snapshot import fetch_snapshot

__all__ = ["run_what_if"]

EXIT_UNREADABLE = 1
EXIT_USAGE = 2


def _settings(config: Configuration) -> WhatIfSettings:
    wait = config.wait_for_pods_ready
    afs = config.admission_fair_sharing
    admission = (
        None
        if afs is None
        else AfsSettings(afs.usage_half_life_seconds, afs.usage_sampling_seconds, afs.resource_weights)
    )
    return WhatIfSettings(
        mappings=config.class_to_resource,
        inventory_mode=config.device_inventory.mode,
        requeuing_timestamp=wait.requeuing_timestamp if wait is not None else "Eviction",
        capacities=config.class_capacities,
        frameworks=config.frameworks,
        fair=FairSharing(config.fair_sharing_strategies, admission),
        extended_resources=config.extended_resources,
    )


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
    except ConfigError as err:
        print(f"error: {named(args.config, err)}", file=sys.stderr)
        return EXIT_USAGE
    except InputError as err:
        print(f"error: {err}", file=sys.stderr)
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
        verdicts, warnings = what_if(snapshot, asked, _settings(config), now_rfc3339())
    except SimulationError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    warnings = [f"not read, the answer may be incomplete: {u}" for u in unreadable] + warnings
    sys.stdout.write(render_what_if(verdicts, warnings, args.output))
    return 0
