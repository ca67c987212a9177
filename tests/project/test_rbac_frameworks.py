"""The RBAC follows the enabled frameworks: the ClusterRole generated for a configuration that
enables one framework grants what the code uses for it and its implied frameworks, nothing of
the others; each framework's add-on file (manifests/frameworks/) adds exactly its part to the
shipped ClusterRole; the Helm chart grants a kind's rules only when its configuration asks.

What the code uses is `tests.support.rbac_scan`'s scan (`used_access`); an access one or more kinds declare in
their registration belongs to those kinds' frameworks (and those that imply them), any other is
the core every configuration needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reconciler.generated import TARGETS, default_frameworks, render, slug
from reconciler.integrations import REGISTRATIONS, enabled, with_implied
from reconciler.runtime.shared.watched import watched_kinds
from tests.support.rbac_scan import Access, compare, expand, used_access

ROOT = Path(__file__).resolve().parents[2]
KUSTOMIZE = next(t for t in TARGETS if t.path == "manifests/rbac.yaml")
FRAMEWORKS = sorted(REGISTRATIONS)


def _declared() -> dict[Access, set[str]]:
    """Access -> the frameworks whose registrations declare it."""
    owners: dict[Access, set[str]] = {}
    for registration in REGISTRATIONS.values():
        rules = [
            {"apiGroups": [a.group], "resources": list(a.resources), "verbs": list(a.verbs)}
            for a in registration.access
        ]
        for access in expand(rules):
            owners.setdefault(access, set()).add(registration.framework)
    return owners


def used_for(frameworks: list[str]) -> set[Access]:
    on = set(with_implied(frameworks))
    owners = _declared()
    return {a for a in used_access() if a not in owners or owners[a] & on}


def granted_for(frameworks: list[str]) -> set[Access]:
    """The kustomize ClusterRole as generated for a configuration enabling `frameworks`."""
    text = render((ROOT / KUSTOMIZE.path).read_text(), KUSTOMIZE, shipped=frameworks)
    (role,) = [
        d
        for d in yaml.safe_load_all(text)
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dra-quota-reconciler"
    ]
    namespaced = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "Role"]
    return expand(role["rules"]) | {a for r in namespaced for a in expand(r["rules"])}


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_framework_alone_is_granted_what_the_code_uses_for_it(framework: str) -> None:
    assert compare(granted_for([framework]), used_for([framework])) == []


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_every_kind_watched_for_a_framework_may_be_listed_and_watched(framework: str) -> None:
    granted = granted_for([framework])
    rows = watched_kinds(True, tuple(enabled([framework])), device_classes=True)
    missing = [
        r.resource.plural for r in rows if (r.resource.group, r.resource.plural, "watch") not in granted
    ]
    assert missing == []


def test_the_comparison_sees_a_framework_rule_in_the_core() -> None:
    # A rule of another framework's kind granted to batch/job alone is reported.
    extra = {("apps", "statefulsets", "list")}
    assert compare(granted_for(["batch/job"]) | extra, used_for(["batch/job"])) == [
        "granted but not used: ('apps', 'statefulsets', 'list')"
    ]


def _cluster_roles(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "ClusterRole"]


@pytest.mark.parametrize(
    "path", sorted((ROOT / "manifests" / "frameworks").glob("*.yaml")), ids=lambda p: p.stem
)
def test_a_framework_file_adds_exactly_its_part(path: Path) -> None:
    (framework,) = [f for f in FRAMEWORKS if slug(f) == path.stem]
    shipped = list(default_frameworks(ROOT))
    base = granted_for(shipped)
    (role,) = _cluster_roles(path)
    assert base | expand(role["rules"] or []) == granted_for([*shipped, framework])
    docs = list(yaml.safe_load_all(path.read_text()))
    binding = next(d for d in docs if d["kind"] == "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dra-quota-reconciler", "namespace": "dra-quota-system"}
    ]


def test_the_shipped_role_is_the_shipped_configurations() -> None:
    shipped = list(default_frameworks(ROOT))
    assert shipped == ["batch/job"]
    docs = list(yaml.safe_load_all((ROOT / "manifests" / "rbac.yaml").read_text()))
    (role,) = [
        d
        for d in docs
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "dra-quota-reconciler"
    ]
    assert expand(role["rules"]) | {
        a for d in docs if d and d["kind"] == "Role" for a in expand(d["rules"])
    } == granted_for(shipped)
    assert ("apps", "statefulsets", "watch") not in expand(role["rules"])
