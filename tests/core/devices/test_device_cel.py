"""DeviceClass CEL selectors: which published devices a class takes, and errors that name the field."""

from __future__ import annotations

from typing import Any

import msgspec

from reconciler.api import DeviceClass
from reconciler.api.slices import SliceDevice
from reconciler.core.devices.device_cel import compile_device_class, device_facts

DRIVER = "gpu.nvidia.com"


def device_class(name: str, *expressions: str) -> DeviceClass:
    body = {
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }
    result: DeviceClass = msgspec.convert(body, DeviceClass)
    return result


def device(name: str, attributes: dict[str, Any], capacity: dict[str, str] | None = None) -> SliceDevice:
    body = {
        "name": name,
        "attributes": attributes,
        "capacity": {k: {"value": v} for k, v in (capacity or {}).items()},
    }
    result: SliceDevice = msgspec.convert(body, SliceDevice)
    return result


GPU = device("gpu-0", {"type": {"string": "gpu"}, "productName": {"string": "Tesla-T4"}}, {"memory": "16Gi"})
MIG = device("gpu-0-mig-1g", {"type": {"string": "mig"}, "profile": {"string": "1g.5gb"}}, {"memory": "5Gi"})


def test_the_fake_drivers_class_takes_whole_gpus_only() -> None:
    cls = compile_device_class(
        device_class(
            "gpu.nvidia.com",
            f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].type == "gpu"',
        )
    )
    assert cls.usable
    assert cls.selects(device_facts(DRIVER, GPU))
    assert not cls.selects(device_facts(DRIVER, MIG))
    assert not cls.selects(device_facts("other.example.com", GPU))


def test_every_selector_must_accept_and_no_selector_takes_everything() -> None:
    both = compile_device_class(
        device_class(
            "t4", f'device.driver == "{DRIVER}"', f'device.attributes["{DRIVER}"].productName == "A100"'
        )
    )
    assert not both.selects(device_facts(DRIVER, GPU))
    assert compile_device_class(device_class("any")).selects(device_facts(DRIVER, MIG))


def test_capacity_compares_as_quantities() -> None:
    big = compile_device_class(
        device_class("big", f'device.capacity["{DRIVER}"].memory.compareTo(quantity("10Gi")) >= 0')
    )
    assert big.selects(device_facts(DRIVER, GPU))
    assert not big.selects(device_facts(DRIVER, MIG))
    small = compile_device_class(
        device_class("small", f'device.capacity["{DRIVER}"].memory.isLessThan(quantity("8Gi"))')
    )
    assert small.selects(device_facts(DRIVER, MIG))


def test_qualified_attribute_names_go_to_their_own_domain() -> None:
    dev = device("d", {"example.com/rack": {"string": "r1"}, "index": {"int": 3}})
    cls = compile_device_class(
        device_class(
            "r", 'device.attributes["example.com"].rack == "r1"', f'device.attributes["{DRIVER}"].index > 2'
        )
    )
    assert cls.selects(device_facts(DRIVER, dev))


def test_a_missing_attribute_does_not_select_and_does_not_raise() -> None:
    cls = compile_device_class(device_class("x", f'device.attributes["{DRIVER}"].nothing == "x"'))
    assert not cls.selects(device_facts(DRIVER, GPU))


def test_a_compile_error_names_the_class_and_field() -> None:
    cls = compile_device_class(device_class("broken", 'device.driver == "a"', "device.driver == "))
    assert not cls.usable
    assert len(cls.errors) == 1
    assert cls.errors[0].startswith(
        "DeviceClass broken: spec.selectors[1].cel.expression: Invalid value: 'device.driver == '"
    )
    # A class that cannot be compiled selects nothing (the scheduler could not allocate from it).
    assert not cls.selects(device_facts(DRIVER, GPU))


def test_a_selector_without_an_expression_is_reported() -> None:
    body = {"metadata": {"name": "empty"}, "spec": {"selectors": [{"cel": {}}]}}
    cls = compile_device_class(msgspec.convert(body, DeviceClass))
    assert cls.errors == (
        "DeviceClass empty: spec.selectors[0].cel.expression: Required value: a CEL expression is needed",
    )


def test_devices_that_differ_only_in_what_the_selectors_do_not_read_share_one_evaluation() -> None:
    cls = compile_device_class(
        device_class("g", f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'")
    )
    assert cls.projection == (("attributes", DRIVER, "type"),)
    gpus = [
        device(f"gpu-{i}", {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{i}"}}) for i in range(50)
    ]
    assert all(cls.selects(device_facts(DRIVER, d)) for d in gpus)
    assert not cls.selects(device_facts(DRIVER, MIG))
    assert len(cls._memo) == 2  # one evaluation for the 50 GPUs, one for the partition
    # A missing attribute is remembered apart from an empty one.
    assert not cls.selects(device_facts(DRIVER, device("bare", {})))
    assert len(cls._memo) == 3


def test_an_expression_reading_attributes_another_way_is_evaluated_per_device() -> None:
    cls = compile_device_class(device_class("m", f"'{DRIVER}' in device.attributes"))
    assert cls.projection is None
    assert cls.selects(device_facts(DRIVER, GPU))
    assert cls.selects(device_facts(DRIVER, MIG))
    assert len(cls._memo) == 2
