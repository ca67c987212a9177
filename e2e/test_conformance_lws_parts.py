"""The conformance runner's LeaderWorkerSet parts, without a test-bed: each group's Workload has
keys of its own in a snapshot, and with the leaderworkerset framework both sides' LWS and pod
webhooks are registered (Kueue's and the controller's alike)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from e2e.conformance.groups import GroupNamed, group_named
from e2e.conformance.kueue import LWS_WEBHOOK_GROUPS, kueue_build, webhook_configurations
from e2e.conformance.runner import _webhook_groups, our_webhooks
from e2e.conformance.scenario import all_scenarios, load_scenario
from e2e.conformance.snapshot import take_snapshot
from e2e.support.lws import enables_lws
from e2e.testbed import KubeClient

Obj = dict[str, Any]
INDEX = "kueue.x-k8s.io/component-workload-index"


def _group_workload(name: str, index: int, admitted: bool) -> Obj:
    owner = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "serve"}
    pod = {"apiVersion": "v1", "kind": "Pod", "name": f"serve-{index}"}
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "annotations": {INDEX: str(index)},
            "ownerReferences": [owner, pod],
        },
        "spec": {},
        "status": {"admission": {"clusterQueue": "cq"} if admitted else None},
    }


class _Api:
    """Two groups' Workloads of one set, a Job's Workload, an Event naming group 1's Workload."""

    async def get(self, path: str, params: dict[str, str] | None = None) -> Obj:
        if path.endswith("/workloads"):
            job = {
                "metadata": {"name": "job-a-1f2e3", "ownerReferences": [{"kind": "Job", "name": "a"}]},
                "spec": {},
            }
            items = [_group_workload("leaderworkerset-serve-0-abcde", 0, True)]
            items += [_group_workload("leaderworkerset-serve-1-fghij", 1, False), job]
            return {"items": [{**w, "metadata": {"namespace": "ns", **w["metadata"]}} for w in items]}
        if path.endswith("/events"):
            involved = {"kind": "Workload", "name": "leaderworkerset-serve-1-fghij"}
            event = {
                "involvedObject": involved,
                "type": "Warning",
                "reason": "Pending",
                "message": "no quota",
            }
            return {"items": [event]}
        return {"items": []}


@pytest.mark.asyncio
async def test_each_group_of_a_set_has_keys_of_its_own() -> None:
    flat = await take_snapshot(cast(KubeClient, GroupNamed(cast(KubeClient, _Api()))), ("ns",))
    assert flat["Workload[ns/LeaderWorkerSet/serve/0].admission"] == {"clusterQueue": "cq"}
    assert flat["Workload[ns/LeaderWorkerSet/serve/1].admission"] is None
    assert "Workload[ns/Job/a].admission" in flat  # a Job's Workload as before
    assert flat["Events"] == ["Workload[LeaderWorkerSet/serve/1] Warning Pending: no quota"]
    # Read directly, both groups would share one key (the later one wins).
    plain = await take_snapshot(cast(KubeClient, _Api()), ("ns",))
    assert [k for k in plain if k.endswith(".admission")] == [
        "Workload[ns/LeaderWorkerSet/serve].admission",
        "Workload[ns/Job/a].admission",
    ]


def test_only_a_sets_workloads_are_renamed() -> None:
    workload = _group_workload("w", 3, False)
    renamed = group_named(workload)
    assert [r["name"] for r in renamed["metadata"]["ownerReferences"]] == ["serve/3", "serve-3"]
    assert workload["metadata"]["ownerReferences"][0]["name"] == "serve"  # the original kept
    del workload["metadata"]["annotations"][INDEX]
    assert group_named(workload) is workload


def test_the_lws_scenario_registers_both_sides_lws_and_pod_webhooks() -> None:
    scenario = load_scenario(all_scenarios()["lws-two-groups"])
    assert enables_lws(scenario.configuration)
    groups = _webhook_groups(scenario)
    assert groups == LWS_WEBHOOK_GROUPS
    ours = {h["name"] for c in our_webhooks(9443, b"CA", groups) for h in c["webhooks"]}
    assert {"mleaderworkerset.kb.io", "vleaderworkerset.kb.io", "mpod.kb.io", "vpod.kb.io"} <= ours
    assert not [n for n in ours if "jobset" in n]
    others = load_scenario(all_scenarios()["walkthrough"])
    assert not enables_lws(others.configuration)
    plain = {h["name"] for c in our_webhooks(9443, b"CA", _webhook_groups(others)) for h in c["webhooks"]}
    assert not plain & {"mleaderworkerset.kb.io", "mpod.kb.io"}


def test_kueues_lws_and_pod_webhooks_are_registered_with_the_framework(tmp_path: Path) -> None:
    manifests = kueue_build().webhooks
    if not manifests.is_file():  # as Kueue's build ships them: the same shape, a stand-in copy
        manifests = tmp_path / "manifests.yaml"
        hooks = [
            {"name": n, "clientConfig": {"service": {"path": p}}, "rules": [{"apiGroups": [g]}]}
            for n, p, g in (
                ("mjob.kb.io", "/mutate-batch-v1-job", "batch"),
                ("mleaderworkerset.kb.io", "/mutate-leaderworkerset", "leaderworkerset.x-k8s.io"),
                ("mpod.kb.io", "/mutate--v1-pod", ""),
                ("mjobset.kb.io", "/mutate-jobset", "jobset.x-k8s.io"),
            )
        ]
        doc = {"apiVersion": "v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"}}
        manifests.write_text(yaml.safe_dump({**doc, "webhooks": hooks}))
    with_lws = {
        h["name"]
        for c in webhook_configurations(manifests, 1, b"CA", LWS_WEBHOOK_GROUPS)
        for h in c["webhooks"]
    }
    assert {"mjob.kb.io", "mleaderworkerset.kb.io", "mpod.kb.io"} <= with_lws
    assert "mjobset.kb.io" not in with_lws
    without = {h["name"] for c in webhook_configurations(manifests, 1, b"CA") for h in c["webhooks"]}
    assert "mjob.kb.io" in without
    assert not without & {"mleaderworkerset.kb.io", "mpod.kb.io"}
