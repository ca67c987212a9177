"""NodePrepareResources / NodeUnprepareResources, independent of gRPC and proto versions.

Prepare, for each claim the kubelet names: read the claim, check that it is the
same object (UID) and allocated, take the allocation results of this driver in
this node's pool, write the claim's CDI spec and remember the claim in the
checkpoint. A claim already in the checkpoint is answered from it (its CDI
spec is rewritten if it went missing), so repeated calls give the same answer
without reading the claim again. Unprepare removes the CDI spec and the
checkpoint entry; a claim this plugin does not know is fine. Every claim in a
request gets an entry; errors are per claim.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import e2e.testbed.kubeletplugin.cdi as cdi
from e2e.testbed.kubeclient import Obj
from e2e.testbed.kubeletplugin.checkpoint import load_checkpoint, save_checkpoint
from e2e.testbed.kubeletplugin.claims import ClaimSource
from e2e.testbed.kubeletplugin.config import PluginConfig
from e2e.testbed.kubeletplugin.devices import device_uuid
from e2e.testbed.kubeletplugin.model import (
    Checkpoint,
    ClaimRef,
    PreparedClaim,
    PreparedDevice,
    PrepareResult,
)

log = logging.getLogger(__name__)


class ClaimError(Exception):
    """A reason to refuse one claim; its message goes back to the kubelet."""


class DraNodeService:
    """The driver's node-side logic. Call ``load()`` once before serving."""

    def __init__(self, config: PluginConfig, claims: ClaimSource) -> None:
        self.config = config
        self._claims = claims
        self._checkpoint = Checkpoint(driver_name=config.driver_name, node_name=config.node_name)
        self._lock = asyncio.Lock()
        self._loaded = False

    async def load(self) -> None:
        """Read the checkpoint from the plugin directory (creating the directories)."""
        cfg = self.config

        def _load() -> Checkpoint:
            cfg.plugin_dir.mkdir(parents=True, exist_ok=True)
            cfg.cdi_dir.mkdir(parents=True, exist_ok=True)
            return load_checkpoint(cfg.checkpoint_file, cfg.driver_name, cfg.node_name)

        async with self._lock:
            self._checkpoint = await asyncio.to_thread(_load)
            self._loaded = True
        log.info("checkpoint %s: %d prepared claim(s)", cfg.checkpoint_file, len(self._checkpoint.claims))

    @property
    def prepared(self) -> dict[str, PreparedClaim]:
        """Prepared claims by UID (a copy)."""
        return dict(self._checkpoint.claims)

    async def prepare(self, refs: Sequence[ClaimRef]) -> dict[str, PrepareResult]:
        if not self._loaded:
            await self.load()
        results: dict[str, PrepareResult] = {}
        async with self._lock:
            added: list[ClaimRef] = []
            for ref in refs:
                try:
                    devices, new = await self._prepare_one(ref)
                except ClaimError as err:
                    results[ref.uid] = PrepareResult(error=str(err))
                    log.info("prepare %s/%s (%s) refused: %s", ref.namespace, ref.name, ref.uid, err)
                except Exception as err:
                    log.exception("prepare %s/%s (%s) failed", ref.namespace, ref.name, ref.uid)
                    results[ref.uid] = PrepareResult(
                        error=f"preparing claim {ref.namespace}/{ref.name}: {type(err).__name__}: {err}"
                    )
                else:
                    results[ref.uid] = PrepareResult(devices=devices)
                    if new:
                        added.append(ref)
            if added:
                try:
                    await self._save()
                except OSError as err:
                    log.error("saving the checkpoint failed: %s", err)
                    for ref in added:
                        self._checkpoint.claims.pop(ref.uid, None)
                        results[ref.uid] = PrepareResult(error=f"saving the checkpoint: {err}")
        return results

    async def unprepare(self, refs: Sequence[ClaimRef]) -> dict[str, str]:
        """Claim UID -> error ("" when unprepared or never prepared)."""
        if not self._loaded:
            await self.load()
        errors: dict[str, str] = {}
        async with self._lock:
            changed = False
            for ref in refs:
                try:
                    await asyncio.to_thread(cdi.remove_spec, cdi.spec_path(self.config, ref.uid))
                except OSError as err:
                    errors[ref.uid] = f"removing the CDI spec of claim {ref.uid}: {err}"
                    continue
                errors[ref.uid] = ""
                if self._checkpoint.claims.pop(ref.uid, None) is not None:
                    changed = True
                    log.info("unprepared claim %s/%s (%s)", ref.namespace, ref.name, ref.uid)
            if changed:
                try:
                    await self._save()
                except OSError as err:
                    for ref in refs:
                        errors[ref.uid] = errors[ref.uid] or f"saving the checkpoint: {err}"
        return errors

    async def _prepare_one(self, ref: ClaimRef) -> tuple[tuple[PreparedDevice, ...], bool]:
        """The claim's devices and whether the checkpoint gained an entry."""
        known = self._checkpoint.claims.get(ref.uid)
        if known is not None:
            await self._write_cdi(ref.uid, known.devices)
            return known.devices, False
        claim = await self._claims.get_claim(ref.namespace, ref.name)
        if claim is None:
            raise ClaimError(f"ResourceClaim {ref.namespace}/{ref.name} not found")
        devices = self._devices_of(ref, claim)
        await self._write_cdi(ref.uid, devices)
        self._checkpoint.claims[ref.uid] = PreparedClaim(
            namespace=ref.namespace, name=ref.name, devices=devices
        )
        log.info(
            "prepared claim %s/%s (%s): %s",
            ref.namespace,
            ref.name,
            ref.uid,
            ", ".join(d.device_name for d in devices) or "no devices of this driver",
        )
        return devices, True

    def _devices_of(self, ref: ClaimRef, claim: Obj) -> tuple[PreparedDevice, ...]:
        cfg = self.config
        uid = (claim.get("metadata") or {}).get("uid")
        if uid != ref.uid:
            raise ClaimError(
                f"ResourceClaim {ref.namespace}/{ref.name} has UID {uid}, "
                f"not the expected {ref.uid} (deleted and recreated?)"
            )
        allocation = (claim.get("status") or {}).get("allocation")
        if not allocation:
            raise ClaimError(f"ResourceClaim {ref.namespace}/{ref.name} is not allocated")
        results = (allocation.get("devices") or {}).get("results") or []
        devices: list[PreparedDevice] = []
        for result in results:
            if result.get("driver") != cfg.driver_name:
                continue
            pool, name = result.get("pool", ""), result.get("device", "")
            if pool != cfg.node_name:
                log.warning(
                    "claim %s/%s: device %s/%s is in another node's pool; ignored",
                    ref.namespace,
                    ref.name,
                    pool,
                    name,
                )
                continue
            try:
                gpu_uuid = device_uuid(cfg.node_name, name)
            except ValueError as err:
                raise ClaimError(f"ResourceClaim {ref.namespace}/{ref.name}: {err}") from None
            request = result.get("request", "")
            share_id = result.get("shareID")
            devices.append(
                PreparedDevice(
                    request_names=(request,) if request else (),
                    pool_name=pool,
                    device_name=name,
                    cdi_device_ids=(cdi.cdi_device_id(cfg, ref.uid, name),),
                    share_id=str(share_id) if share_id else None,
                    uuid=gpu_uuid,
                )
            )
        return tuple(devices)

    async def _write_cdi(self, claim_uid: str, devices: tuple[PreparedDevice, ...]) -> None:
        path = cdi.spec_path(self.config, claim_uid)
        if not devices:
            await asyncio.to_thread(cdi.remove_spec, path)
            return
        spec = cdi.build_spec(self.config, claim_uid, devices)
        await asyncio.to_thread(cdi.write_spec, path, spec)

    async def _save(self) -> None:
        await asyncio.to_thread(save_checkpoint, self.config.checkpoint_file, self._checkpoint)
