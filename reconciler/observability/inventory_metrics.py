"""Scrape-time gauges of the device inventory (``deviceInventory.mode`` Report or Enforce).

- ``dra_quota_flavor_devices{flavor,device_class,state}``: devices of a mapped DeviceClass
  on a flavor's nodes, ``state`` = ``published`` or ``allocated``;
- ``dra_quota_flavor_quota_over_devices{cluster_queue,flavor,resource}``: how far the nominal
  quota exceeds the devices published for it (0 when covered);
- ``dra_quota_device_class_mapping_problems{device_class,problem}``: 1 per mapped DeviceClass
  that is ``not_found`` or ``invalid`` (selectors that do not compile), 1 per DeviceClass a
  ResourceClaimTemplate asks for that is ``unmapped``.

The families are always declared (the alerts name them); they have samples only while the
mode is Report or Enforce, on the leader, after the first count.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["InventoryCollector", "InventorySnapshot", "InventorySource"]


@dataclass(frozen=True, slots=True)
class InventorySnapshot:
    # (flavor, device class) -> (published, allocated)
    devices: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    # (cluster queue, flavor, resource) -> nominal quota beyond the published devices
    quota_over: dict[tuple[str, str, str], float] = field(default_factory=dict)
    # (device class, problem)
    mapping_problems: list[tuple[str, str]] = field(default_factory=list)


InventorySource = Callable[[], InventorySnapshot | None]


class InventoryCollector(Collector):
    def __init__(self, source: Callable[[], InventorySource | None]) -> None:
        self._source = source

    def describe(self) -> Iterable[GaugeMetricFamily]:
        return []

    def collect(self) -> Iterable[GaugeMetricFamily]:
        source = self._source()
        snap = (source() if source is not None else None) or InventorySnapshot()
        devices = GaugeMetricFamily(
            "dra_quota_flavor_devices",
            "Devices of a mapped DeviceClass on the nodes of a ResourceFlavor, by state "
            "(published or allocated)",
            labels=["flavor", "device_class", "state"],
        )
        for (flavor, cls), (published, allocated) in sorted(snap.devices.items()):
            devices.add_metric([flavor, cls, "published"], published)
            devices.add_metric([flavor, cls, "allocated"], allocated)
        over = GaugeMetricFamily(
            "dra_quota_flavor_quota_over_devices",
            "How far a ClusterQueue's nominal quota of a DRA-mapped resource exceeds the devices "
            "published on the flavor's nodes (0 when they cover it)",
            labels=["cluster_queue", "flavor", "resource"],
        )
        for labels, value in sorted(snap.quota_over.items()):
            over.add_metric(list(labels), value)
        problems = GaugeMetricFamily(
            "dra_quota_device_class_mapping_problems",
            "1 per DeviceClass whose mapping is wrong: not_found (mapped, does not exist), invalid "
            "(selectors do not compile), unmapped (asked for by a ResourceClaimTemplate, not mapped)",
            labels=["device_class", "problem"],
        )
        for cls, problem in sorted(set(snap.mapping_problems)):
            problems.add_metric([cls, problem], 1)
        return [devices, over, problems]
