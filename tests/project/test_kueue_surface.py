"""docs/kueue-surface.yaml, the inventory of Kueue v0.18.1's surface, is whole and true: nothing Kueue
reads is accepted here and silently ignored.

Each entry has an allowed status and names tests that exist; each Configuration field is loaded
with a value and the loader does what the status says (refused: a ConfigError naming it; named:
accepted and named as without effect; handled: accepted and not named); each label Kueue reads
only behind a feature gate has that gate named when given; each refused or named item is told in
the README or docs/configuration.md. Where Kueue's module source is on the machine
(tests/support/kueue_source.py) the lists are compared with it: the Configuration's json tags and
every kueue.x-k8s.io/ string of its Go code. Without the source the frozen lists are the
reference (nothing is skipped: the other checks run either way)."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import yaml

from reconciler.config import ConfigError, Configuration, parse_config
from tests.support.kueue_source import KUEUE_VERSION, configuration_paths, kueue_source, kueue_strings
from tests.support.node_ids import ROOT, check_test

INVENTORY = ROOT / "docs" / "kueue-surface.yaml"
STATUSES = {"configuration": {"handled", "refused", "named"}, "labels": {"handled", "refused", "named"}}
CONFIG_KEYS = {"path", "status", "tests", "sample", "doc", "names", "note", "doc_name"}
LABEL_KEYS = {"key", "object", "status", "tests", "gate", "note"}
OWN_KEYS = {"key", "what", "here"}
PREFIX = "kueue.x-k8s.io/"


@cache
def _inventory() -> dict[str, Any]:
    data = yaml.safe_load(INVENTORY.read_text())
    assert isinstance(data, dict)
    return data


def _config_entries() -> list[dict[str, Any]]:
    return list(_inventory()["configuration"])


def _label_entries() -> list[dict[str, Any]]:
    return list(_inventory()["labels"])


def _nested(path: str, value: object) -> dict[str, Any]:
    out: Any = value
    for part in reversed(path.split(".")):
        out = {part: out}
    assert isinstance(out, dict)
    return out


def _document(entry: dict[str, Any]) -> dict[str, Any]:
    """A v1beta2 Configuration carrying the entry's field: its `doc`, else its `sample` nested at its
    path, else (a field of a section not read) a placeholder value."""
    base = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}
    path = entry["path"]
    if path in base:
        return base | {path: entry["sample"]}
    fragment = entry["doc"] if "doc" in entry else _nested(path, entry.get("sample", "x"))
    return base | fragment


def _named_paths(config: Configuration) -> list[str]:
    return [f.path for f in config.ignored_fields]


def _covers(named: str, path: str) -> bool:
    return path == named or path.startswith(f"{named}.")


def test_the_inventory_is_of_kueue_v0_18_1_and_every_entry_is_well_formed() -> None:
    data = _inventory()
    assert data["kueue"] == KUEUE_VERSION
    problems = []
    for section, keys, ident in (
        ("configuration", CONFIG_KEYS, "path"),
        ("labels", LABEL_KEYS, "key"),
        ("kueue_own", OWN_KEYS, "key"),
    ):
        seen: set[str] = set()
        for entry in data[section]:
            name = entry.get(ident)
            if extra := set(entry) - keys:
                problems.append(f"{section} {name}: unknown keys {sorted(extra)}")
            if name in seen:
                problems.append(f"{section} {name}: listed twice")
            seen.add(name)
            if section in STATUSES:
                if entry.get("status") not in STATUSES[section]:
                    problems.append(
                        f"{section} {name}: status {entry.get('status')!r} is not one of {STATUSES[section]}"
                    )
                if not entry.get("tests"):
                    problems.append(f"{section} {name}: no test shows it")
                problems += [
                    f"{section} {name}: {p}" for t in entry.get("tests") or [] if (p := check_test(t))
                ]
            if section != "configuration" and not str(name).startswith(PREFIX):
                problems.append(f"{section} {name}: not a {PREFIX} key")
    assert problems == []


def test_every_nested_field_has_its_parent_listed() -> None:
    paths = [e["path"] for e in _config_entries()]
    orphans = [p for p in paths if "." in p and p.rpartition(".")[0] not in paths]
    assert orphans == []


@pytest.mark.parametrize("entry", _config_entries(), ids=lambda e: e["path"])
def test_each_configuration_field_is_loaded_as_its_status_says(entry: dict[str, Any]) -> None:
    path, status = entry["path"], entry["status"]
    document = _document(entry)
    if status == "refused":
        with pytest.raises(ConfigError) as err:
            parse_config(document)
        assert str(err.value).startswith(entry.get("names", path)), str(err.value)
        return
    config = parse_config(document)
    named = [n for n in _named_paths(config) if _covers(n, path)]
    if status == "named":
        assert named, f"{path}: accepted but not named at start-up"
    else:
        assert named == [], f"{path}: handled, yet named as without effect"


@pytest.mark.parametrize("entry", [e for e in _label_entries() if "gate" in e], ids=lambda e: e["key"])
def test_a_gated_label_is_named_through_its_gate(entry: dict[str, Any]) -> None:
    """Kueue reads the key only with its alpha gate on; the gate given is named with its name, so
    the key is never silently ignored."""
    assert entry["status"] == "named"
    config = parse_config(
        {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "featureGates": {entry["gate"]: True},
        }
    )
    reasons = {f.path: f.reason for f in config.ignored_fields}
    assert entry["gate"] in reasons.get("featureGates", "").rpartition(": ")[2].split(", ")


def _told(text: str) -> str:
    return " ".join(text.split())


def test_every_refused_or_named_item_is_told_in_the_readme_or_the_configuration_page() -> None:
    """What a user meets as a refusal or a start-up warning is in the README's "What it does not do"
    or in docs/configuration.md: a refused field (or the refused section it belongs to), each
    refused or gated label, each named top-level section."""
    text = _told((ROOT / "README.md").read_text() + (ROOT / "docs" / "configuration.md").read_text())
    refused = {e["path"]: e for e in _config_entries() if e["status"] == "refused"}
    missing = []
    for entry in _config_entries():
        path = entry["path"]
        if entry["status"] == "refused":
            top = refused[min((p for p in refused if _covers(p, path)), key=len)]
            name = top.get("doc_name", top["path"])
        elif entry["status"] == "named":
            name = path.split(".")[0] if not path.startswith("integrations.") else path
        else:
            continue
        if f"`{name}" not in text:
            missing.append(name)
    missing += [
        e["key"] for e in _label_entries() if e["status"] != "handled" and f"`{e['key']}`" not in text
    ]
    assert sorted(set(missing)) == []


def test_the_configuration_fields_are_kueues() -> None:
    """The frozen list's top-level fields are those the loader knows for v1beta2 (but this
    controller's own deviceInventory), and the whole list is Kueue v0.18.1's json tags when its
    source is here."""
    listed = [e["path"] for e in _config_entries()]
    with pytest.raises(ConfigError) as err:
        parse_config({"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "zzz": 1})
    known = str(err.value).partition("known fields here are: ")[2].split(", ")
    assert sorted(set(known) - {"deviceInventory"}) == sorted(p for p in listed if "." not in p)
    source = kueue_source()
    if source is not None:
        types_go = source / "apis" / "config" / "v1beta2" / "configuration_types.go"
        assert sorted(configuration_paths(types_go.read_text())) == sorted(listed)


def test_the_labels_are_every_kueue_x_k8s_io_string_of_kueues_code() -> None:
    """Read from users' objects or Kueue's own: together every kueue.x-k8s.io/ string of Kueue's
    Go code, when its source is here."""
    listed = {e["key"] for e in _label_entries()} | {e["key"] for e in _inventory()["kueue_own"]}
    assert not {e["key"] for e in _label_entries()} & {e["key"] for e in _inventory()["kueue_own"]}
    source = kueue_source()
    if source is not None:
        assert sorted(kueue_strings(source)) == sorted(listed)
