"""`reconciler explain (job|workload) NAMESPACE/NAME`: fetch, explain, print."""

from __future__ import annotations

import argparse
import asyncio
import sys

from reconciler.api.times import now_rfc3339
from reconciler.config import ConfigError, load_config, named
from reconciler.core.queueing.admission_fair_sharing import AfsSettings
from reconciler.integrations import check_frameworks
from reconciler.kube import ConfigError as KubeConfigError
from reconciler.kube import KubeClient, KubeError

from .analyze import explain
from .fetch import ExplainError, fetch_state
from .render import render_json, render_text
from .state import ClusterState, PodsReadyClock, Target, TargetError, explainable
from .whatif_command import run_what_if

__all__ = ["EXIT_UNREADABLE", "add_parser", "run"]

EXIT_UNREADABLE = 1
EXIT_USAGE = 2


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "explain",
        help="why a job (of any registered kind) or Workload is admitted, pending or stalled, from the "
        "cluster's live state",
        description=(
            "Reads the job or Workload and what admission depends on (queues, flavors, quota in use, "
            "claim templates, DeviceClasses, pods, claims, Warning events) and says in plain words "
            "whether it is admitted, pending, stalled, backing off or deactivated, and what would "
            "have to change or finish for it to run. Read-only."
        ),
    )
    parser.add_argument(
        "kind",
        metavar="KIND",
        nargs="?",
        help="what to explain: job, workload, or any enabled kind by its lowercase Kind ("
        + ", ".join(sorted(explainable()))
        + "; the kinds whose pods form groups are explained by their groups' Workloads)",
    )
    parser.add_argument(
        "ref", metavar="NAMESPACE/NAME", nargs="?", help="e.g. p3-dra-demo/kueue-dra-pending-b"
    )
    parser.add_argument(
        "--what-if",
        metavar="FILE",
        help="a dry run instead (needs --config): would the jobs or Workloads in FILE be admitted now, "
        "where, and what would they preempt, against the cluster's live queues and Workloads",
    )
    parser.add_argument(
        "--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)"
    )
    parser.add_argument(
        "--config",
        help="the controller's Configuration file (deviceClassMappings, waitForPodsReady); "
        "default: DeviceClass mappings learned from what the controller charged",
    )
    parser.add_argument(
        "--request-timeout", type=float, default=15.0, help="seconds per API request (default 15)"
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")


async def _fetch(args: argparse.Namespace, target: Target) -> ClusterState:
    client = await KubeClient.from_kubeconfig(args.kubeconfig)
    async with client:
        return await fetch_state(client, target, now=now_rfc3339(), request_timeout=args.request_timeout)


def run(args: argparse.Namespace) -> int:
    if args.what_if is not None:
        if args.kind is not None:
            print("error: give either KIND NAMESPACE/NAME or --what-if FILE", file=sys.stderr)
            return EXIT_USAGE
        return run_what_if(args)
    if args.kind is None or args.ref is None:
        print("error: give KIND NAMESPACE/NAME (or --what-if FILE)", file=sys.stderr)
        return EXIT_USAGE
    try:
        target = Target.parse(args.kind, args.ref)
        config = load_config(args.config) if args.config else None
        if config is not None:
            check_frameworks(config)
    except ConfigError as err:
        print(f"error: {named(args.config, err)}", file=sys.stderr)
        return EXIT_USAGE
    except TargetError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    if args.request_timeout <= 0:
        print("error: --request-timeout: give a positive number of seconds", file=sys.stderr)
        return EXIT_USAGE
    try:
        state = asyncio.run(_fetch(args, target))
    except KubeConfigError as err:
        print(f"error: kubeconfig: {err} (give --kubeconfig FILE or set KUBECONFIG)", file=sys.stderr)
        return EXIT_UNREADABLE
    except (ExplainError, KubeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_UNREADABLE
    if config is not None:
        state.mappings = config.class_to_resource
        state.capacities = config.class_capacities
        state.inventory_on = config.device_inventory.enabled
        state.extended_resources = config.extended_resources
        state.fair_sharing = config.fair_sharing_strategies
        afs = config.admission_fair_sharing
        if afs is not None:
            weights = afs.resource_weights
            state.afs = AfsSettings(afs.usage_half_life_seconds, afs.usage_sampling_seconds, weights)
        wait = config.wait_for_pods_ready
        if wait is not None:
            state.pods_ready = PodsReadyClock(wait.timeout_seconds, wait.recovery_timeout_seconds)
    explanation = explain(state)
    sys.stdout.write(render_json(explanation) if args.output == "json" else render_text(explanation))
    return 0
