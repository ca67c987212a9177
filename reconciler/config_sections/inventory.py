"""``deviceInventory``: this controller's own section (Kueue has none), quota compared with the
devices the DRA drivers publish."""

from __future__ import annotations

from dataclasses import dataclass

from .fields import ConfigError, check_unknown, expect

__all__ = ["INVENTORY_MODES", "DeviceInventoryConfig", "parse_device_inventory"]

INVENTORY_MODES = ("Off", "Report", "Enforce")


@dataclass(frozen=True)
class DeviceInventoryConfig:
    """``deviceInventory``: compare quota with the devices published in ResourceSlices.

    ``Off`` (default): nothing more is watched. ``Report``: DeviceClasses and ResourceSlices
    are watched too (Nodes always are, for topology-aware scheduling); ClusterQueues get the
    DevicesCoverQuota condition, and metrics and Events show the inventory. ``Enforce``: the
    same, and admission waits for free devices too."""

    mode: str = "Off"

    @property
    def enabled(self) -> bool:
        return self.mode != "Off"

    @property
    def enforce(self) -> bool:
        return self.mode == "Enforce"


def parse_device_inventory(raw: object) -> DeviceInventoryConfig:
    path = "deviceInventory"
    if raw is None:
        return DeviceInventoryConfig()
    doc = expect(raw, dict, path, "an object like {mode: Enforce}")
    check_unknown(doc, {"mode"}, path)
    mode = doc.get("mode", "Off")
    if mode is False:  # YAML 1.1 reads an unquoted Off as false
        mode = "Off"
    if mode not in INVENTORY_MODES:
        raise ConfigError(
            f"{path}.mode: Unsupported value: {mode!r}: supported values: "
            + ", ".join(f'"{m}"' for m in INVENTORY_MODES)
        )
    return DeviceInventoryConfig(mode=str(mode))
