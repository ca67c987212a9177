"""What API access the code uses, read from its source (for tests/project/test_rbac*.py).

The access is derived from the code, not listed by hand:
- every row of the table of watched kinds (`reconciler.runtime.shared.watched.WATCHED_KINDS`, from
  which the controller's informers are made) needs list and watch, and so does any other
  informer's resource (`Informer(client, RESOURCE, ...)`, also through a tuple of resources);
- every writer action (`Create`, `MergePatch`, `PostEvent` with a resource
  constant and maybe a `subresource`) needs create or patch; a job's write (on its
  integration's resource) reaches a subresource only for an integration whose module makes a
  `Patch` to that subresource;
- every direct client call on a resource constant (`client.create(RES, ...)`,
  `client.merge_patch(...)`, `client.delete(...)`, `client.get(RES.item_path(...))`,
  `client.request("PUT", RES.item_path(...))`, ...) needs its verb, also when the path
  is first given to a name (`path = RES.item_path(...)`);
- a verb-labelled request wrapper (`self._call("update", "PUT", ...)`, as the
  leader election's) in a module that names exactly one resource constant needs
  that verb on that resource (the verb must match the HTTP method);
- a Workload created with `blockOwnerDeletion` on its Job needs update on
  `jobs/finalizers` (OwnerReferencesPermissionEnforcement).
A resource constant the code mentions without any derivable verb fails the
test, so new kinds of calls cannot slip past the scan. Rules that name their
objects (`resourceNames`) name exactly the objects the shipped configuration
makes the code touch.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.api import resources
from reconciler.api.resources import Resource
from reconciler.integrations import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reconciler"
RBAC = ROOT / "manifests" / "rbac.yaml"
CONTROLLER = "dra-quota-reconciler"
METRICS_READER = "dra-quota-reconciler-metrics-reader"

Access = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)

CONSTANTS: dict[str, Resource] = {
    name: value for name, value in vars(resources).items() if isinstance(value, Resource)
}
ACTION_VERBS = {"Create": "create", "PostEvent": "create", "MergePatch": "patch", "Delete": "delete"}
CLIENT_VERBS = {"create": "create", "merge_patch": "patch", "json_patch": "patch", "delete": "delete"}
HTTP_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
KUBE_VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})

# Resources granted only in the controller's own namespace (a Role, not the ClusterRole).
NAMESPACED_ONLY = {("coordination.k8s.io", "leases"), ("", "secrets")}
# Verbs a rule's resourceNames can restrict (create, list and watch name no object up front).
NAMEABLE_VERBS = frozenset({"get", "update", "patch", "delete"})


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


# `reconciler explain` runs with the user's kubeconfig, never as the controller's ServiceAccount.
NOT_THE_CONTROLLER = PACKAGE / "explain"


def _sources() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == Path(resources.__file__) or NOT_THE_CONTROLLER in path.parents:
            continue
        yield _module_name(path), ast.parse(path.read_text(), str(path))


@dataclass(frozen=True)
class Scope:
    """What a call in one module can be resolved against."""

    module: str
    loop_sources: dict[str, ast.expr] = field(default_factory=dict)  # loop variable -> what it iterates
    assigned: dict[str, list[ast.expr]] = field(default_factory=dict)  # name -> every value given to it
    only: Resource | None = None  # the module's one resource constant, if it names exactly one

    @classmethod
    def of(cls, module: str, tree: ast.Module, here: set[str]) -> Scope:
        loops = {
            gen.target.id: gen.iter
            for node in ast.walk(tree)
            if isinstance(node, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp)
            for gen in node.generators
            if isinstance(gen.target, ast.Name)
        }
        loops |= {
            node.target.id: node.iter
            for node in ast.walk(tree)
            if isinstance(node, ast.For | ast.AsyncFor) and isinstance(node.target, ast.Name)
        }
        assigned: dict[str, list[ast.expr]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        assigned.setdefault(target.id, []).append(node.value)
        only = CONSTANTS[next(iter(here))] if len(here) == 1 else None
        return cls(module, loops, assigned, only)


def _resource_of(node: ast.expr, scope: Scope) -> list[Resource]:
    """The resource constant(s) an expression stands for; [] when it cannot be told statically."""
    if isinstance(node, ast.Attribute) and node.attr == "resource" and _names_integration(node.value):
        # `<integration>.resource`: the kind of any registered integration.
        return [integration.resource for integration in REGISTRY.values()]
    if isinstance(node, ast.Name):
        if node.id in CONSTANTS:
            return [CONSTANTS[node.id]]
        source = scope.loop_sources.get(node.id)
        if isinstance(source, ast.Name):
            value = getattr(importlib.import_module(scope.module), source.id, None)
            if isinstance(value, tuple) and all(isinstance(v, Resource) for v in value):
                return list(value)
    return []


def _is_integration_resource(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "resource" and _names_integration(node.value)


def _names_integration(node: ast.expr) -> bool:
    """`integration` or `self.integration`."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""
    return name == "integration"


def _path_call(node: ast.expr) -> tuple[ast.expr, str, ast.expr | None] | None:
    """`RES.item_path(ns, name[, sub])` or `RES.list_path(...)`: (RES, kind of path, subresource)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("item_path", "list_path")
    ):
        sub = node.args[2] if len(node.args) > 2 else _keyword(node, "subresource")
        return node.func.value, node.func.attr, sub
    return None


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _subresources(sub: ast.expr | None, scope: Scope) -> list[str | None]:
    """Every value a subresource argument can have: a literal, `a if c else b`, or a name assigned those."""
    if sub is None:
        return [None]
    if isinstance(sub, ast.Constant):
        assert sub.value is None or isinstance(sub.value, str), (
            f"subresource not a string: {ast.unparse(sub)}"
        )
        return [sub.value]
    if isinstance(sub, ast.IfExp):
        return _subresources(sub.body, scope) + _subresources(sub.orelse, scope)
    if isinstance(sub, ast.Name) and sub.id in scope.assigned:
        return [v for value in scope.assigned[sub.id] for v in _subresources(value, scope)]
    raise AssertionError(f"subresource the scan cannot read: {ast.unparse(sub)}")


def patch_subresources(integration: object) -> set[str]:
    """The subresources an integration's patches are sent to: `Patch(body, "status")` (or
    `subresource="status"`) made in the module that defines its class."""
    module = importlib.import_module(type(integration).__module__)
    tree = ast.parse(Path(str(module.__file__)).read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Patch":
            sub = node.args[1] if len(node.args) > 1 else _keyword(node, "subresource")
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                found.add(sub.value)
            else:
                assert sub is None, f"a Patch subresource the scan cannot read: {ast.unparse(node)}"
    return found


def _named(resource: Resource, sub: ast.expr | None, scope: Scope) -> list[str]:
    return [resource.plural if s is None else f"{resource.plural}/{s}" for s in _subresources(sub, scope)]


def watched_access() -> set[Access]:
    """List and watch for every watched kind, from the table the informers are made from, with
    the rows of every registered integration (the shipped RBAC lets any of them be enabled)."""
    from reconciler.runtime.shared.watched import WATCHED_KINDS, job_rows

    rows = (*WATCHED_KINDS, *job_rows(list(REGISTRY.values())))
    return {(row.resource.group, row.resource.plural, verb) for row in rows for verb in ("list", "watch")}


def derive_access() -> tuple[set[Access], set[str]]:
    """(access the code needs, names of resource constants the code mentions)."""
    found: set[Access] = watched_access()
    mentioned: set[str] = set()
    for module, tree in _sources():
        here = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id in CONSTANTS}
        mentioned |= here
        scope = Scope.of(module, tree, here)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                found |= set(call_access(node, scope))
    return found, mentioned


def _wrapper_access(call: ast.Call, only: Resource | None) -> Iterator[Access]:
    """`wrapper("update", "PUT", ...)`: a verb and its HTTP method, on the module's one resource."""
    if len(call.args) < 2 or not all(isinstance(a, ast.Constant) for a in call.args[:2]):
        return
    verb, method = (a.value for a in call.args[:2])  # type: ignore[attr-defined]
    if verb not in KUBE_VERBS or method not in (*HTTP_VERBS, "GET"):
        return
    assert only is not None, f"{ast.unparse(call)}: in a module naming several resources (or none)"
    expected = HTTP_VERBS.get(method, {"get", "list", "watch"})
    assert verb in expected, f"{ast.unparse(call)}: verb {verb} does not match method {method}"
    yield (only.group, only.plural, verb)


def call_access(call: ast.Call, scope: Scope) -> Iterator[Access]:
    yield from _wrapper_access(call, scope.only)
    func = call.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    if name == "Informer" and len(call.args) > 1:
        for res in _resource_of(call.args[1], scope):
            yield (res.group, res.plural, "list")
            yield (res.group, res.plural, "watch")
    elif name in ACTION_VERBS and len(call.args) > 1:
        sub = call.args[5] if name == "MergePatch" and len(call.args) > 5 else _keyword(call, "subresource")
        resources = _resource_of(call.args[1], scope)
        if name == "Delete" and _is_integration_resource(call.args[1]):
            # Only an integration whose jobs are stopped by deletion (pods) deletes its jobs.
            resources = [i.resource for i in REGISTRY.values() if i.stop_deletes]
        if _is_integration_resource(call.args[1]):
            # A job's write goes to a subresource only when its integration makes such a patch.
            for i in REGISTRY.values():
                if i.resource in resources:
                    named = _named(i.resource, sub, scope)
                    kept = [n for n in named if "/" not in n or n.split("/", 1)[1] in patch_subresources(i)]
                    yield from ((i.resource.group, n, ACTION_VERBS[name]) for n in kept)
            return
        for res in resources:
            yield from ((res.group, n, ACTION_VERBS[name]) for n in _named(res, sub, scope))
    elif isinstance(func, ast.Attribute) and name in CLIENT_VERBS and call.args:
        for res in _resource_of(call.args[0], scope):
            sub = _keyword(call, "subresource")
            yield from ((res.group, n, CLIENT_VERBS[name]) for n in _named(res, sub, scope))
    elif isinstance(func, ast.Attribute) and name in ("get", "_get", "request", "stream_lines") and call.args:
        method = "GET"
        path_arg = call.args[0]
        if name == "request":
            if len(call.args) < 2 or not isinstance(call.args[0], ast.Constant):
                return
            method, path_arg = str(call.args[0].value), call.args[1]
        for res_node, kind, sub in _path_calls(path_arg, scope):
            for res in _resource_of(res_node, scope):
                if name == "stream_lines":
                    verb = "watch"
                elif method == "GET":
                    verb = "get" if kind == "item_path" else "list"
                else:
                    verb = HTTP_VERBS[method]
                yield from ((res.group, n, verb) for n in _named(res, sub, scope))


def _path_calls(node: ast.expr, scope: Scope) -> list[tuple[ast.expr, str, ast.expr | None]]:
    """The path calls a path argument stands for: inline, or held in a name (`path = RES.item_path(...)`)."""
    target = _path_call(node)
    if target is not None:
        return [target]
    if isinstance(node, ast.Name):
        return [t for value in scope.assigned.get(node.id, []) if (t := _path_call(value)) is not None]
    return []


def _blocks_job_deletion() -> bool:
    """Whether the Workload made for a Job blocks the Job's deletion (needs jobs/finalizers)."""
    from reconciler.integrations.batchjob import workload_for_job
    from tests.support.builders import job

    owners = workload_for_job(job("j")).metadata.owner_references
    return any(o.kind == "Job" and o.block_owner_deletion for o in owners)


def used_access() -> set[Access]:
    found, _ = derive_access()
    if _blocks_job_deletion():
        # Every integration's Workload is made the same way (workload_for_object).
        for integration in REGISTRY.values():
            res = integration.resource
            found.add((res.group, f"{res.plural}/finalizers", "update"))
    # The jobs of the kinds made from their pods (LeaderWorkerSet groups, a StatefulSet's pods) are
    # groups: runtime/jobs/lws.py's LwsJobs sends every write of the generic Jobs concern to the
    # group's pods, and its Workloads are owned by the set without blocking its deletion. The set
    # itself is only listed and watched.
    from_pods = {i.resource.plural for i in REGISTRY.values() if i.jobs_from_pods}
    found = {a for a in found if a[1].split("/")[0] not in from_pods or a[2] in ("list", "watch")}
    # The pod webhook reads the object that controls a pod, of each kind that can be another's
    # child (webhook/service.py hands their resources to ApiLookups, which gets them).
    found |= {(i.resource.group, i.resource.plural, "get") for i in REGISTRY.values() if not i.top_level}
    return found


def expand(rules: Iterable[dict[str, Any]]) -> set[Access]:
    granted: set[Access] = set()
    for rule in rules:
        assert "nonResourceURLs" not in rule, rule
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                for verb in rule["verbs"]:
                    assert "*" not in (group, res, verb), f"wildcard in {rule}"
                    granted.add((group, res, verb))
    return granted


def compare(granted: set[Access], used: set[Access]) -> list[str]:
    problems = [f"granted but not used: {a}" for a in sorted(granted - used)]
    return problems + [f"used but not granted: {a}" for a in sorted(used - granted)]
