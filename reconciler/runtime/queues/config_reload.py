"""Live reload of the Configuration's DeviceClass mappings.

A mounted ConfigMap changes its file by swapping a symlink, which inotify on
the file itself misses; so the file is polled: read (off the event loop) every
`interval` seconds and compared by content. A changed file goes through the
inbox like any event, so only the reconciler touches the running
configuration.

What may change live: `resources.deviceClassMappings` only. The other fields
(waitForPodsReady, integrations, webhook, ...) are read once at start; a change
to them is logged as needing a restart and otherwise ignored.

Re-evaluation rule: a new mapping never changes what is admitted. A Workload
that holds quota keeps the charge it was admitted with (its status.admission)
until it finishes or is evicted; every Workload that does not hold quota
(pending, inadmissible, or waiting out a requeue backoff) is charged again
with the new mappings, so one that waited for an unmapped DeviceClass becomes
admissible, and its status.resourceRequests follow the new charge. An admission
already in flight lands with the charge it was decided on.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog

from reconciler.config import (
    LIVE_FIELDS,
    ConfigError,
    Configuration,
    cannot_read,
    named,
    parse_config_file,
    with_live_changes,
)
from reconciler.integrations import check_frameworks, describe_unimplemented
from reconciler.runtime.shared.context import Context

__all__ = ["ConfigReload", "ConfigReloads", "read_config", "watch_config"]

log = structlog.get_logger(__name__)

# A read that has not finished by then is abandoned (a hung network file system); the next poll retries.
READ_TIMEOUT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class ConfigReload:
    """The configuration file changed: what it now holds, or why it cannot be used."""

    path: str
    digest: str  # sha256 of the file's content (or of the read error)
    config: Configuration | None = None
    error: str | None = None


def read_config(path: str, last_digest: str | None) -> ConfigReload | None:
    """Read and validate the file (blocking: run it in a thread); None when unchanged. Whatever
    is wrong is one line naming the file, as at start-up (`reconciler.config.load_config`)."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        digest = f"unreadable:{err.errno}"
        if digest == last_digest:
            return None
        return ConfigReload(path, digest, error=cannot_read(path, err))
    digest = hashlib.sha256(data).hexdigest()
    if digest == last_digest:
        return None
    try:
        config = parse_config_file(path, data)
        unimplemented = check_frameworks(config)
        if unimplemented:
            log.warning(describe_unimplemented(unimplemented), path=path)
        return ConfigReload(path, digest, config=config)
    except ConfigError as err:
        return ConfigReload(path, digest, error=named(path, err))


async def watch_config(path: str, interval: float, put: Callable[[ConfigReload], None]) -> None:
    """Poll the file every `interval` seconds; each change is put in the inbox once."""
    last: str | None = None
    while True:
        try:
            change = await asyncio.wait_for(asyncio.to_thread(read_config, path, last), READ_TIMEOUT_SECONDS)
        except TimeoutError:
            log.warning("reading the configuration file timed out; trying again", path=path)
            change = None
        if change is not None:
            last = change.digest
            put(change)
        await asyncio.sleep(interval)


class ConfigReloads:
    """Applies a changed configuration file to the running reconciler (on the reconciler's loop)."""

    def __init__(self, ctx: Context, mappings_changed: Callable[[], int]) -> None:
        self.ctx = ctx
        self._mappings_changed = mappings_changed
        self._first = True

    def apply(self, change: ConfigReload) -> None:
        ctx = self.ctx
        first, self._first = self._first, False
        if change.config is None:
            log.error(
                "configuration change refused; the running configuration is kept",
                path=change.path,
                error=change.error,
            )
            ctx.metrics.config_reload("invalid")
            return
        current = ctx.config
        updated, restart = with_live_changes(current, change.config)
        if restart:
            log.warning(
                "configuration fields changed that only a restart applies; ignored until then",
                path=change.path,
                fields=restart,
                live=list(LIVE_FIELDS),
            )
        if updated.device_class_mappings == current.device_class_mappings:
            # The first read of the file the process started with is no change.
            if not first or restart:
                ctx.metrics.config_reload("unchanged")
            ctx.metrics.config_in_use(change.digest, bump=False)
            return
        ctx.config = updated
        marked = self._mappings_changed()
        ctx.metrics.config_reload("applied")
        ctx.metrics.config_in_use(change.digest, bump=True)
        log.info(
            "DeviceClass mappings reloaded",
            path=change.path,
            mappings={m.name: list(m.device_class_names) for m in updated.device_class_mappings},
            workloads_recharged=marked,
        )
