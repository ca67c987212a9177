"""manifests/rbac.yaml (with manifests/frameworks/) grants exactly the API access the code uses:
nothing missing, nothing extra. The access is derived from the code by `tests.support.rbac_scan`
(see its docstring for what it reads)."""

from __future__ import annotations

import ast
from typing import Any

import pytest
import yaml

from reconciler.api import resources
from tests.support.rbac_scan import (
    CONSTANTS,
    CONTROLLER,
    METRICS_READER,
    NAMEABLE_VERBS,
    NAMESPACED_ONLY,
    RBAC,
    ROOT,
    Scope,
    call_access,
    compare,
    derive_access,
    expand,
    used_access,
)


def _roles() -> tuple[dict[str, Any], dict[str, Any]]:
    """The ClusterRole with every framework's add-on (manifests/frameworks/) as one, and the
    Roles of the controller's namespace as one."""
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    (cluster_role,) = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == CONTROLLER]
    for path in sorted((ROOT / "manifests" / "frameworks").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == "ClusterRole":
                cluster_role = {**cluster_role, "rules": [*cluster_role["rules"], *(doc["rules"] or [])]}
    roles = [d for d in docs if d["kind"] == "Role"]
    assert len({r["metadata"]["namespace"] for r in roles}) == 1
    return cluster_role, {"rules": [rule for r in roles for rule in r["rules"]]}


def test_the_scan_finds_what_the_code_does() -> None:
    found, mentioned = derive_access()
    # Spot checks that the scan itself works: one of each kind of use.
    assert ("kueue.x-k8s.io", "workloads", "watch") in found  # a row of the watched kinds' table
    assert ("kueue.x-k8s.io", "workloads", "create") in found  # Create action
    assert ("kueue.x-k8s.io", "workloads/status", "patch") in found  # MergePatch with subresource
    assert ("batch", "jobs", "patch") in found
    assert ("", "events", "create") in found  # PostEvent
    # Every resource the code names has at least one verb: a call the scan cannot read fails here.
    derived = {(g, r.split("/")[0]) for g, r, _ in found}
    unexplained = {n for n in mentioned if (CONSTANTS[n].group, CONSTANTS[n].plural) not in derived}
    assert unexplained == set(), f"resource constants used in a way the scan cannot read: {unexplained}"


def test_rbac_grants_exactly_what_the_code_uses() -> None:
    cluster_role, role = _roles()
    granted = expand(cluster_role["rules"]) | expand(role["rules"])
    assert compare(granted, used_access()) == []


def test_leases_only_in_the_own_namespace() -> None:
    cluster_role, role = _roles()
    cluster_wide = {(g, r) for g, r, _ in expand(cluster_role["rules"])}
    assert cluster_wide & NAMESPACED_ONLY == set()
    assert {(g, r) for g, r, _ in expand(role["rules"])} == NAMESPACED_ONLY


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["update"]},
            "granted but not used",
        ),
        ({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}, "granted but not used"),
        (None, "used but not granted"),
    ],
)
def test_the_comparison_can_fail(change: dict[str, Any] | None, expected: str) -> None:
    cluster_role, role = _roles()
    rules = list(cluster_role["rules"])
    if change is None:
        rules = rules[1:]  # drop the first rule: something used is no longer granted
    else:
        rules.append(change)
    problems = compare(expand(rules) | expand(role["rules"]), used_access())
    assert problems
    assert all(p.startswith(expected) for p in problems)


def test_the_scan_reads_direct_client_calls() -> None:
    source = """
async def elect(client, namespace):
    await client.get(LEASES.item_path(namespace, "x"))
    await client.create(LEASES, namespace, b"{}")
    await client.request("PUT", LEASES.item_path(namespace, "x"), body=b"{}")
    await client.merge_patch(PODS, namespace, "p", b"{}", subresource="status")
    async for line in client.stream_lines(PODS.list_path(), {}, connect_timeout=1, read_timeout=1):
        pass
"""
    tree = ast.parse(source)
    access = {
        a
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        for a in call_access(node, Scope("reconciler.kube"))
    }
    assert access == {
        ("coordination.k8s.io", "leases", "get"),
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "update"),
        ("", "pods/status", "patch"),
        ("", "pods", "watch"),
    }


def test_the_scan_reads_verb_labelled_wrappers() -> None:
    tree = ast.parse('await self._call("get", "GET", None)\nawait self._call("update", "PUT", body)')
    leases = resources.LEASES
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    access = {a for c in calls for a in call_access(c, Scope("reconciler.kube", only=leases))}
    assert access == {("coordination.k8s.io", "leases", "get"), ("coordination.k8s.io", "leases", "update")}
    mismatch = ast.parse('self._call("create", "PUT", body)').body[0].value  # type: ignore[attr-defined]
    with pytest.raises(AssertionError, match="does not match"):
        list(call_access(mismatch, Scope("reconciler.kube", only=leases)))


def test_the_scan_reads_a_conditional_subresource() -> None:
    tree = ast.parse(
        'sub = "status" if purpose == "clear" else None\n'
        "submit(MergePatch(purpose, JOBS, ns, name, patch, subresource=sub))"
    )
    scope = Scope.of("reconciler.runtime", tree, {"JOBS"})
    access = {a for n in ast.walk(tree) if isinstance(n, ast.Call) for a in call_access(n, scope)}
    assert access == {("batch", "jobs", "patch"), ("batch", "jobs/status", "patch")}
    unreadable = ast.parse("MergePatch(p, JOBS, ns, name, patch, subresource=pick())").body[0].value  # type: ignore[attr-defined]
    with pytest.raises(AssertionError, match="cannot read"):
        list(call_access(unreadable, scope))


def _named_objects() -> dict[tuple[str, str], set[str]]:
    """(apiGroup, resource) -> the objects the shipped configuration makes the code name."""
    from reconciler.api.resources import (
        CUSTOM_RESOURCE_DEFINITIONS,
        LEASES,
        MUTATING_WEBHOOK_CONFIGURATIONS,
        SECRETS,
        VALIDATING_WEBHOOK_CONFIGURATIONS,
    )
    from reconciler.cli import _parser
    from reconciler.config import load_config
    from reconciler.webhook.certmanager import CONVERSION_CRDS, CertSettings

    certs = load_config(ROOT / "manifests" / "config" / "configuration.yaml").internal_cert_management
    assert certs.enable
    settings = CertSettings("", certs.webhook_secret_name, certs.webhook_service_name)
    # The Deployment leaves --leader-election-id at its default.
    lease = _parser().parse_args(["run", "--config", "unused.yaml"]).leader_election_id
    return {
        (LEASES.group, LEASES.plural): {lease},
        (SECRETS.group, SECRETS.plural): {certs.webhook_secret_name},
        (MUTATING_WEBHOOK_CONFIGURATIONS.group, MUTATING_WEBHOOK_CONFIGURATIONS.plural): {
            settings.configuration_name("mutating")
        },
        (VALIDATING_WEBHOOK_CONFIGURATIONS.group, VALIDATING_WEBHOOK_CONFIGURATIONS.plural): {
            settings.configuration_name("validating")
        },
        (CUSTOM_RESOURCE_DEFINITIONS.group, CUSTOM_RESOURCE_DEFINITIONS.plural): set(CONVERSION_CRDS),
    }


def test_named_rules_name_what_the_shipped_configuration_uses() -> None:
    cluster_role, role = _roles()
    named = _named_objects()
    seen: set[tuple[str, str]] = set()
    for rule in cluster_role["rules"] + role["rules"]:
        if "resourceNames" not in rule:
            for group in rule["apiGroups"]:
                for res in rule["resources"]:
                    # Only creating one of the named kinds may go unrestricted (it names no object).
                    assert (group, res) not in named or rule["verbs"] == ["create"], rule
            continue
        assert set(rule["verbs"]) <= NAMEABLE_VERBS, f"resourceNames cannot restrict {rule['verbs']}"
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                assert set(rule["resourceNames"]) == named[(group, res)], rule
                seen.add((group, res))
    assert seen == set(named)


def test_the_scan_reads_a_path_held_in_a_name() -> None:
    tree = ast.parse(
        "path = SECRETS.item_path(ns, name)\n"
        "await client.get(path)\n"
        'await client.request("PUT", path, body=b"{}")\n'
        "await client.create(SECRETS, ns, body)\n"
    )
    scope = Scope.of("reconciler.webhook", tree, {"SECRETS"})
    access = {a for n in ast.walk(tree) if isinstance(n, ast.Call) for a in call_access(n, scope)}
    assert access == {("", "secrets", "get"), ("", "secrets", "update"), ("", "secrets", "create")}


def test_the_metrics_reader_may_get_exactly_what_the_metrics_server_authorizes() -> None:
    """The scrapers' ClusterRole grants the non-resource URL and verb the server's
    SubjectAccessReview asks about, nothing else; the controller's binds nothing to it."""
    from reconciler.observability.server import METRICS_PATH

    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    (reader,) = [d for d in docs if d["kind"] == "ClusterRole" and d["metadata"]["name"] == METRICS_READER]
    assert reader["rules"] == [{"nonResourceURLs": [METRICS_PATH], "verbs": ["get"]}]
    bound = {d["roleRef"]["name"] for d in docs if d["kind"].endswith("Binding")}
    assert METRICS_READER not in bound  # bound to the scraper by the Prometheus add-on, not here
    assert {
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    } <= used_access()
