"""``resources.deviceClassMappings``: which DeviceClasses are charged as which quota resource,
and (this controller's extension) which device capacities are charged besides the device count."""

from __future__ import annotations

from dataclasses import dataclass

from .fields import DNS_SUBDOMAIN, QUALIFIED_NAME, ConfigError, check_unknown, expect

__all__ = [
    "MAX_CLASSES_PER_MAPPING",
    "MAX_MAPPINGS",
    "CapacityMapping",
    "DeviceClassMapping",
    "parse_mappings",
]

MAX_MAPPINGS = 16
MAX_CLASSES_PER_MAPPING = 8


@dataclass(frozen=True)
class CapacityMapping:
    """``capacity[i]`` of a mapping: charge a device capacity (``name``) as a quota resource."""

    name: str
    resource: str


@dataclass(frozen=True)
class DeviceClassMapping:
    name: str
    device_class_names: tuple[str, ...]
    # This controller's extension: device capacities charged as quota resources too.
    capacity: tuple[CapacityMapping, ...] = ()


def parse_mappings(raw: object, version: str) -> tuple[DeviceClassMapping, ...]:
    path = "resources.deviceClassMappings"
    items = expect(raw, list, path, "a list of {name, deviceClassNames}")
    if len(items) > MAX_MAPPINGS:
        raise ConfigError(
            f"{path}: Too many: {len(items)}: must have at most {MAX_MAPPINGS} items; "
            "merge mappings or drop unused ones"
        )
    allowed = {"name", "deviceClassNames", "capacity"} | ({"sources"} if version == "v1beta2" else set())
    out: list[DeviceClassMapping] = []
    seen_names: set[str] = set()
    owner: dict[str, str] = {}
    for i, item in enumerate(items):
        ipath = f"{path}[{i}]"
        entry = expect(item, dict, ipath, "an object with name and deviceClassNames")
        check_unknown(entry, allowed, ipath)
        if "sources" in entry:
            raise ConfigError(
                f"{ipath}.sources: Kueue's counter and capacity sources are not supported by this "
                "controller; remove sources, and charge a device capacity with this controller's "
                "capacity field instead (capacity: [{name: memory, resource: example.com/gpu-memory}])"
            )
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"{ipath}.name: Required value: name the logical quota resource, e.g. nvidia.com/gpu"
            )
        if not QUALIFIED_NAME.match(name):
            raise ConfigError(
                f"{ipath}.name: Invalid value: {name!r}: must be a qualified name such as "
                "nvidia.com/gpu (optional DNS prefix, '/', then alphanumerics, '-', '_', '.')"
            )
        if name in seen_names:
            raise ConfigError(
                f"{ipath}.name: Duplicate value: {name!r}: each mapping needs its "
                "own name; merge the two entries"
            )
        seen_names.add(name)
        classes = entry.get("deviceClassNames")
        if not classes:
            raise ConfigError(
                f"{ipath}.deviceClassNames: Required value: at least one device class name is required"
            )
        classes = expect(classes, list, f"{ipath}.deviceClassNames", "a list of DeviceClass names")
        if len(classes) > MAX_CLASSES_PER_MAPPING:
            raise ConfigError(
                f"{ipath}.deviceClassNames: Too many: {len(classes)}: must have at most "
                f"{MAX_CLASSES_PER_MAPPING} items; split them over several mappings"
            )
        seen_here: set[str] = set()
        for j, cls in enumerate(classes):
            cpath = f"{ipath}.deviceClassNames[{j}]"
            if not isinstance(cls, str) or not DNS_SUBDOMAIN.match(cls) or len(cls) > 253:
                raise ConfigError(
                    f"{cpath}: Invalid value: {cls!r}: must be a DeviceClass name "
                    "(lower-case DNS subdomain, e.g. gpu.nvidia.com)"
                )
            if cls in seen_here:
                raise ConfigError(f"{cpath}: Duplicate value: {cls!r}: list it once")
            seen_here.add(cls)
            if cls in owner:
                raise ConfigError(
                    f"{cpath}: Invalid value: {cls!r}: device class already mapped to resource "
                    f"{owner[cls]}; a DeviceClass may appear in one mapping only"
                )
            owner[cls] = name
        out.append(DeviceClassMapping(name, tuple(classes), parse_capacity(entry.get("capacity"), ipath)))
    counts = {m.name: f"{path}[{i}].name" for i, m in enumerate(out)}
    for i, mapping in enumerate(out):
        for k, cap in enumerate(mapping.capacity):
            if cap.resource in counts:
                raise ConfigError(
                    f"{path}[{i}].capacity[{k}].resource: Invalid value: {cap.resource!r}: already the "
                    f"device count resource of {counts[cap.resource]}; charge the capacity as a resource "
                    "of its own, e.g. example.com/gpu-memory"
                )
    return tuple(out)


def parse_capacity(raw: object, ipath: str) -> tuple[CapacityMapping, ...]:
    """``capacity``: [{name: memory, resource: example.com/gpu-memory}] (this controller's extension)."""
    if raw is None:
        return ()
    path = f"{ipath}.capacity"
    items = expect(
        raw, list, path, "a list of {name, resource}, e.g. [{name: memory, resource: example.com/gpu-memory}]"
    )
    out: list[CapacityMapping] = []
    names: set[str] = set()
    resources: set[str] = set()
    for k, item in enumerate(items):
        cpath = f"{path}[{k}]"
        entry = expect(item, dict, cpath, "an object with name and resource")
        check_unknown(entry, {"name", "resource"}, cpath)
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(
                f"{cpath}.name: Required value: name the device capacity to charge, as the "
                "ResourceSlices publish it (e.g. memory)"
            )
        if not QUALIFIED_NAME.match(name):
            raise ConfigError(
                f"{cpath}.name: Invalid value: {name!r}: must be a capacity name such as memory or "
                "gpu.nvidia.com/memory (optional DNS prefix, '/', then alphanumerics, '-', '_', '.')"
            )
        if name in names:
            raise ConfigError(f"{cpath}.name: Duplicate value: {name!r}: list each capacity once")
        names.add(name)
        resource = entry.get("resource")
        if not isinstance(resource, str) or not resource:
            raise ConfigError(
                f"{cpath}.resource: Required value: name the quota resource the capacity is charged as, "
                "e.g. example.com/gpu-memory"
            )
        if not QUALIFIED_NAME.match(resource):
            raise ConfigError(
                f"{cpath}.resource: Invalid value: {resource!r}: must be a qualified name such as "
                "example.com/gpu-memory (optional DNS prefix, '/', then alphanumerics, '-', '_', '.')"
            )
        if resource in resources:
            raise ConfigError(
                f"{cpath}.resource: Duplicate value: {resource!r}: two capacities of one mapping need "
                "two quota resources"
            )
        resources.add(resource)
        out.append(CapacityMapping(name, resource))
    return tuple(out)
