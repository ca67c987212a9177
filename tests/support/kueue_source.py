"""Kueue v0.18.1's surface read from its Go source, when the module is on this machine: the field
paths of its v1beta2 Configuration (the json tags of ``apis/config/v1beta2/configuration_types.go``)
and every ``kueue.x-k8s.io/...`` string its non-test Go code holds. Nothing is imported or built:
the Go files are read as text.

Where the source is: ``$KUEUE_SOURCE`` when set, else the Go module cache
(``$(go env GOMODCACHE)/sigs.k8s.io/kueue@v0.18.1``, where ``e2e/build-binaries.sh --kueue``
downloads the module); None when neither is there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

__all__ = ["KUEUE_VERSION", "configuration_paths", "kueue_source", "kueue_strings"]

KUEUE_VERSION = "v0.18.1"
_STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.M | re.S)
_FIELD = re.compile(r"^\s*(?:(\w+)\s+)?([\w.*\[\]]+)\s+`json:\"([^\"]*)\"")
_LITERAL = re.compile(r'"(kueue\.x-k8s\.io/[A-Za-z0-9._/-]*)"')
_RAW_LITERAL = re.compile(r"`(kueue\.x-k8s\.io/[A-Za-z0-9._/-]*)`")
# metav1.TypeMeta, inlined into the Configuration.
_TYPE_META = ("apiVersion", "kind")


def kueue_source() -> Path | None:
    """Kueue's module source, or None when it is not on this machine."""
    given = os.environ.get("KUEUE_SOURCE")
    if given:
        return Path(given)
    go = shutil.which("go")
    if go is None:
        return None
    try:
        cache = subprocess.run(
            [go, "env", "GOMODCACHE"], capture_output=True, text=True, check=True, timeout=60
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    path = Path(cache) / "sigs.k8s.io" / f"kueue@{KUEUE_VERSION}"
    return path if cache and path.is_dir() else None


def _structs(text: str) -> dict[str, list[tuple[str, str, str]]]:
    """Each struct of the file: its fields as (Go name or "" when embedded, type, json tag)."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for match in _STRUCT.finditer(text):
        fields = []
        for line in match.group(2).splitlines():
            field = _FIELD.match(line)
            if field:
                fields.append((field.group(1) or "", field.group(2), field.group(3)))
        out[match.group(1)] = fields
    return out


def _base(go_type: str) -> str:
    """The named type under pointers, slices and maps: ``*[]Foo`` -> ``Foo``."""
    return re.sub(r"^(?:\*|\[\]|map\[[^\]]*\])+", "", go_type)


def configuration_paths(types_go: str) -> list[str]:
    """The dotted json paths of the Configuration's fields, parents before their children; a type
    not declared in the file (metav1, client-go, core/v1) is a leaf; list items add no segment."""
    structs = _structs(types_go)
    paths: list[str] = []

    def walk(struct: str, prefix: str) -> None:
        for _name, go_type, tag in structs[struct]:
            key = tag.split(",")[0]
            base = _base(go_type)
            if not key and ",inline" in tag:
                if base in structs:
                    walk(base, prefix)
                elif base.endswith("TypeMeta"):
                    paths.extend(prefix + k for k in _TYPE_META)
                continue
            if not key or key == "-":
                continue
            paths.append(prefix + key)
            if base in structs:
                walk(base, f"{prefix}{key}.")

    walk("Configuration", "")
    return paths


def kueue_strings(root: Path) -> set[str]:
    """Every ``kueue.x-k8s.io/...`` string literal of the non-test Go files of ``apis/`` and
    ``pkg/`` (test helpers under ``pkg/util/testing*`` and comment lines left out)."""
    found: set[str] = set()
    for top in ("apis", "pkg"):
        for path in (root / top).rglob("*.go"):
            rel = path.relative_to(root).as_posix()
            if path.name.endswith("_test.go") or rel.startswith("pkg/util/testing"):
                continue
            lines = path.read_text(errors="replace").splitlines()
            text = "\n".join(line for line in lines if not line.lstrip().startswith("//"))
            found |= set(_LITERAL.findall(text)) | set(_RAW_LITERAL.findall(text))
    return found
