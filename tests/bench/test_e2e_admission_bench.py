"""bench/e2e_admission: `--wait-for-pods-ready on|off` sets waitForPodsReady alike in the one
Configuration both managers start from (this controller reads it here; Kueue v0.18.1 reads a
v1beta2 document without the field, or a v1beta1 one with `enable: false`, as off)."""

from __future__ import annotations

from bench.e2e_admission import parse_args
from bench.e2e_admission_managers import WAIT_FOR_PODS_READY, bench_configuration
from reconciler.config import parse_config


def test_the_flag_defaults_to_on_and_takes_off() -> None:
    assert parse_args([]).wait_for_pods_ready == "on"
    assert parse_args(["--wait-for-pods-ready", "off"]).wait_for_pods_ready == "off"


def test_on_writes_the_setting_out_and_this_controller_reads_it_as_on() -> None:
    doc = bench_configuration()
    assert doc["apiVersion"].endswith("/v1beta2")
    assert doc["waitForPodsReady"] == WAIT_FOR_PODS_READY
    pods_ready = parse_config(doc).wait_for_pods_ready
    assert pods_ready is not None
    assert (pods_ready.timeout_seconds, pods_ready.block_admission) == (30 * 60.0, False)


def test_off_is_the_same_configuration_with_the_setting_disabled() -> None:
    on, off = bench_configuration(True), bench_configuration(False)
    assert off["apiVersion"].endswith("/v1beta1")
    assert off["waitForPodsReady"] == {"enable": False}
    rest = {"apiVersion", "waitForPodsReady"}
    assert {k: v for k, v in off.items() if k not in rest} == {k: v for k, v in on.items() if k not in rest}
    config_off, config_on = parse_config(off), parse_config(on)
    assert config_off.wait_for_pods_ready is None
    assert config_off.device_class_mappings == config_on.device_class_mappings
    assert config_off.frameworks == config_on.frameworks
