"""The dry run the visibility server answers (`POST .../whatifs`): `reconciler explain --what-if`'s
run, on a snapshot read with the controller's own rights at each request.

The snapshot is read as the command line reads it (every list paged, each request with a timeout);
the admission run is CPU work and runs in a worker thread, off the event loop. The Configuration
is read again from its file at each dry run (its deviceClassMappings and frameworks decide what is
charged), so a reloaded Configuration is followed; an unreadable file keeps the last good one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any

import structlog

from reconciler.api.times import now_rfc3339
from reconciler.config import ConfigError, Configuration, load_config
from reconciler.kube import KubeClient
from reconciler.simulate import InputObject, SimulationError, settings_of, what_if
from reconciler.visibility.dryrun import DryRunAnswer, DryRunner, RequestError

from .snapshot import fetch_snapshot

__all__ = ["dry_runner"]

log = structlog.get_logger(__name__)

REQUEST_TIMEOUT = 20.0


def dry_runner(
    config: Configuration, config_path: str | None, make_client: Callable[[], Awaitable[KubeClient]]
) -> DryRunner:
    """The dry run over the live cluster, as `config` (re-read from `config_path`) charges it."""
    current = [config]

    def configuration() -> Configuration:
        if config_path is None:
            return current[0]
        try:
            current[0] = load_config(config_path)
        except ConfigError as err:
            log.warning(
                "dry run: the Configuration cannot be read again; using the last good one", error=str(err)
            )
        return current[0]

    async def run(namespace: str, objects: Sequence[Mapping[str, Any]]) -> DryRunAnswer:
        config = configuration()
        client = await make_client()
        async with client:
            snapshot, unreadable = await fetch_snapshot(
                client,
                request_timeout=REQUEST_TIMEOUT,
                inventory=config.device_inventory.enabled,
                frameworks=config.frameworks,
            )
        asked = [InputObject(f"request: {o['kind']} {namespace}/{o['metadata']['name']}", o) for o in objects]
        try:
            verdicts, warnings = await asyncio.to_thread(
                what_if, snapshot, asked, settings_of(config), now_rfc3339()
            )
        except SimulationError as err:
            raise RequestError(str(err)) from err
        warnings = [f"not read, the answer may be incomplete: {u}" for u in unreadable] + warnings
        return DryRunAnswer([asdict(v) for v in verdicts], warnings)

    return run
