"""Plain data the plugin and the fake kubelet exchange, independent of the proto version."""

from __future__ import annotations

import msgspec


class ClaimRef(msgspec.Struct, frozen=True, kw_only=True):
    """What the kubelet sends for one claim: namespace, UID and name."""

    namespace: str
    uid: str
    name: str


class PreparedDevice(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """One device of a claim as returned to the kubelet (and kept in the checkpoint)."""

    request_names: tuple[str, ...]
    pool_name: str
    device_name: str
    cdi_device_ids: tuple[str, ...] = ()
    share_id: str | None = None
    # The fake GPU's uuid: not sent to the kubelet, kept to rebuild the CDI spec.
    uuid: str = ""


class PreparedClaim(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    namespace: str
    name: str
    devices: tuple[PreparedDevice, ...] = ()


class PrepareResult(msgspec.Struct, frozen=True, kw_only=True):
    """One entry of NodePrepareResourcesResponse.claims: devices, or a non-empty error."""

    devices: tuple[PreparedDevice, ...] = ()
    error: str = ""


class Checkpoint(msgspec.Struct, kw_only=True, rename="camel"):
    """What survives a plugin restart: the claims prepared on this node, by claim UID."""

    version: int = 1
    driver_name: str = ""
    node_name: str = ""
    claims: dict[str, PreparedClaim] = msgspec.field(default_factory=dict)
