"""DRA beyond Kueue in the running reconciler: live mapping reload, firstAvailable choices on the
Workload, shared claims charged once."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml

from reconciler.api import ClusterQueue, Job, ResourceClaim, ResourceClaimTemplate, Workload
from reconciler.api.resources import (
    CLUSTER_QUEUES,
    RESOURCE_CLAIM_TEMPLATES,
    RESOURCE_CLAIMS,
)
from reconciler.config import parse_config
from reconciler.runtime.queues.config_reload import ConfigReload, read_config, watch_config
from reconciler.runtime.shared.actions import Action
from reconciler.runtime.shared.writer import WriteDone
from reconciler.runtime.workloads.concern import FIRST_AVAILABLE_ANNOTATION
from tests.support.builders import job_body
from tests.support.reconciler_harness import GPU, Harness, apply_patch, decode, of, queues, submitted


def config_doc(mappings: dict[str, list[str]], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "resources": {
            "deviceClassMappings": [{"name": n, "deviceClassNames": c} for n, c in mappings.items()]
        },
        **extra,
    }


def reload(h: Harness, doc: dict[str, Any], digest: str = "d2") -> list[Action]:
    h.reconciler.handle(ConfigReload("config.yaml", digest, config=parse_config(doc)))
    return h.take()


# A request for the first available of a MIG slice and a whole T4.
MIG_OR_T4 = [
    {
        "name": "gpu",
        "firstAvailable": [
            {"name": "mig", "deviceClassName": "mig.nvidia.com"},
            {"name": "t4", "deviceClassName": "gpu.nvidia.com"},
        ],
    }
]


def template(h: Harness, name: str, requests: list[dict[str, Any]]) -> None:
    body = {
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"spec": {"devices": {"requests": requests}}},
    }
    h.event("ADDED", RESOURCE_CLAIM_TEMPLATES, decode(body, ResourceClaimTemplate))


def submit(
    h: Harness, name: str, claims: list[dict[str, str]], parallelism: int = 1
) -> tuple[Workload, list[Action]]:
    body = job_body(name, uid=f"uid-{name}", claims=claims, parallelism=parallelism, completions=parallelism)
    body["metadata"]["resourceVersion"] = h.next_rv()
    workload = submitted(h, decode(body, Job))
    return workload, h.take()


def pending_message(actions: list[Action]) -> str:
    (status,) = of(actions, "workload-status")
    conditions = msgspec.json.decode(status.patch)["status"]["conditions"]
    message: str = next(c["message"] for c in conditions if c["type"] == "QuotaReserved")
    return message


def sample(h: Harness, name: str, labels: dict[str, str] | None = None) -> float | None:
    value: float | None = h.reconciler.metrics.registry.get_sample_value(name, labels or {})
    return value


MIG = [{"name": "g", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 1}}]


# --- live reload of deviceClassMappings ----------------------------------------------------


def test_a_new_mapping_makes_a_waiting_workload_admissible_and_leaves_admitted_ones_alone() -> None:
    h = Harness()
    queues(h, gpus=2)
    template(h, "mig", MIG)
    h.sync_all()
    wl_a, actions = submit(h, "a", [{"name": "g", "resourceClaimTemplateName": "gpu"}])
    (admit_a,) = of(actions, "admit")
    admitted_a = apply_patch(h, wl_a, admit_a)
    h.reconciler.handle(WriteDone(admit_a, body=msgspec.json.encode(admitted_a)))
    h.take()
    _, actions = submit(h, "b", [{"name": "g", "resourceClaimTemplateName": "mig"}])
    assert "DeviceClass mig.nvidia.com is not mapped" in pending_message(actions)
    # The new file maps only the MIG class: b becomes admissible; a keeps its admitted charge.
    actions = reload(h, config_doc({GPU: ["mig.nvidia.com"]}))
    (admit_b,) = of(actions, "admit")
    assert admit_b.name.startswith("job-b-")
    assert h.reconciler.config.class_to_resource == {"mig.nvidia.com": GPU}
    assert h.reconciler.core.is_admitted(("ns", wl_a.metadata.name))
    assert h.reconciler.core.ledger.used("cq", ("t4", GPU)) == 2
    assert sample(h, "dra_quota_config_reload_total", {"result": "applied"}) == 1
    assert sample(h, "dra_quota_config_generation") == 2
    assert sample(h, "dra_quota_config_info", {"hash": "d2"}) == 1


def pending_status(actions: list[Action]) -> tuple[str, list[dict[str, Any]]]:
    """The one pending write among the actions: its QuotaReserved message and resourceRequests."""
    assert of(actions, "admit") == []
    (status,) = of(actions, "workload-status")
    body = msgspec.json.decode(status.patch)["status"]
    assert body["admission"] is None
    return pending_message(actions), body["resourceRequests"]


def test_pending_requests_are_recomputed_with_the_new_mapping() -> None:
    h = Harness()
    queues(h, gpus=1)
    template(h, "two", [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}])
    h.sync_all()
    _, actions = submit(h, "a", [{"name": "g", "resourceClaimTemplateName": "two"}])
    # Two devices of gpu.nvidia.com, charged as 2 nvidia.com/gpu against a quota of 1.
    assert pending_status(actions) == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor t4, "
        "previously considered podsets requests (0) + current podset request (2) > maximum capacity (1)",
        [{"name": "main", "resources": {GPU: "2"}}],
    )
    # The same devices now count as example.com/accel, which the ClusterQueue does not cover.
    actions = reload(h, config_doc({"example.com/accel": ["gpu.nvidia.com"]}))
    assert pending_status(actions) == (
        "couldn't assign flavors to pod set main: resource example.com/accel unavailable in ClusterQueue",
        [{"name": "main", "resources": {"example.com/accel": "2"}}],
    )


def test_an_invalid_file_is_refused_and_the_running_mappings_kept() -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    before = h.reconciler.config
    error = (
        "config.yaml: resources.deviceClassMappings[0].name: Required value: name the logical quota resource"
    )
    h.reconciler.handle(ConfigReload("config.yaml", "bad", error=error))
    assert h.reconciler.config is before
    assert sample(h, "dra_quota_config_reload_total", {"result": "invalid"}) == 1
    assert sample(h, "dra_quota_config_generation") == 1


def test_only_the_mappings_change_live() -> None:
    h = Harness()
    queues(h)
    h.sync_all()
    doc = config_doc({GPU: ["gpu.nvidia.com"]}, waitForPodsReady={"timeout": "1m"})
    reload(h, doc, digest="first")
    wait = h.reconciler.config.wait_for_pods_ready
    assert wait is not None
    assert wait.timeout_seconds == 30 * 60
    assert sample(h, "dra_quota_config_reload_total", {"result": "unchanged"}) == 1


def test_the_first_read_of_the_starting_file_is_no_change() -> None:
    h = Harness()
    reload(h, config_doc({GPU: ["gpu.nvidia.com"]}), digest="start")
    assert sample(h, "dra_quota_config_reload_total", {"result": "unchanged"}) is None
    assert sample(h, "dra_quota_config_info", {"hash": "start"}) == 1


def _configmap_swap(folder: Path, name: str, text: str) -> None:
    """What the kubelet does to a mounted ConfigMap: a new timestamped folder, then ..data swapped."""
    target = folder / f"..{name}"
    target.mkdir()
    (target / "config.yaml").write_text(text)
    link = folder / "..data_tmp"
    link.symlink_to(target.name)
    os.replace(link, folder / "..data")
    if not (folder / "config.yaml").is_symlink():
        (folder / "config.yaml").symlink_to("..data/config.yaml")


def test_read_config_follows_a_configmap_symlink_swap(tmp_path: Path) -> None:
    path = str(tmp_path / "config.yaml")
    _configmap_swap(tmp_path, "v1", yaml.safe_dump(config_doc({GPU: ["gpu.nvidia.com"]})))
    first = read_config(path, None)
    assert first is not None
    assert first.config is not None
    assert read_config(path, first.digest) is None
    _configmap_swap(tmp_path, "v2", yaml.safe_dump(config_doc({GPU: ["mig.nvidia.com"]})))
    second = read_config(path, first.digest)
    assert second is not None
    assert second.config is not None
    assert second.config.class_to_resource == {"mig.nvidia.com": GPU}
    bad = config_doc({GPU: ["gpu.nvidia.com"]})
    bad["resources"]["deviceClassMappings"].append({"name": "other", "deviceClassNames": ["gpu.nvidia.com"]})
    _configmap_swap(tmp_path, "v3", yaml.safe_dump(bad))
    third = read_config(path, second.digest)
    assert third is not None
    assert third.config is None
    assert third.error is not None
    assert "resources.deviceClassMappings[1].deviceClassNames[0]" in third.error
    assert "already mapped to resource nvidia.com/gpu" in third.error


def test_read_config_reports_an_unreadable_file_once(tmp_path: Path) -> None:
    missing = str(tmp_path / "nope.yaml")
    change = read_config(missing, None)
    assert change is not None
    assert change.error is not None
    assert "cannot read" in change.error
    assert read_config(missing, change.digest) is None


@pytest.mark.asyncio
async def test_watch_config_puts_each_change_once(tmp_path: Path) -> None:
    file = tmp_path / "config.yaml"
    file.write_text(yaml.safe_dump(config_doc({GPU: ["gpu.nvidia.com"]})))
    seen: list[ConfigReload] = []
    task = asyncio.create_task(watch_config(str(file), 0.01, seen.append))
    try:
        for _ in range(200):
            if seen:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        assert len(seen) == 1
        file.write_text(yaml.safe_dump(config_doc({GPU: ["mig.nvidia.com"]})))
        for _ in range(200):
            if len(seen) == 2:
                break
            await asyncio.sleep(0.01)
        assert len(seen) == 2
        assert seen[1].config is not None
        assert seen[1].config.class_to_resource == {"mig.nvidia.com": GPU}
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


# --- firstAvailable -------------------------------------------------------------------------


def test_the_first_available_choice_is_written_on_the_workload() -> None:
    h = Harness()
    queues(h)
    template(h, "alt", MIG_OR_T4)
    h.sync_all()
    workload, actions = submit(h, "a", [{"name": "g", "resourceClaimTemplateName": "alt"}])
    (admit,) = of(actions, "admit")
    # Not before the admission lands: it would make the admission's conditional write conflict.
    assert of(actions, "workload-annotate") == []
    admitted = apply_patch(h, workload, admit)
    h.reconciler.handle(WriteDone(admit, body=msgspec.json.encode(admitted)))
    (annotate,) = of(h.take(), "workload-annotate")
    assert msgspec.json.decode(annotate.patch) == {
        "metadata": {
            "annotations": {
                FIRST_AVAILABLE_ANNOTATION: "podset main, claim g, request gpu: subrequest t4 "
                "(DeviceClass gpu.nvidia.com charged as 1 nvidia.com/gpu)"
            }
        }
    }


def test_a_waiting_workload_gets_its_choice_with_its_pending_status() -> None:
    h = Harness()
    queues(h, gpus=1)
    template(
        h,
        "alt",
        [
            {
                "name": "gpu",
                "firstAvailable": [{"name": "two", "deviceClassName": "gpu.nvidia.com", "count": 2}],
            }
        ],
    )
    h.sync_all()
    _, actions = submit(h, "a", [{"name": "g", "resourceClaimTemplateName": "alt"}])
    assert of(actions, "admit") == []
    (annotate,) = of(actions, "workload-annotate")
    assert (
        "subrequest two"
        in msgspec.json.decode(annotate.patch)["metadata"]["annotations"][FIRST_AVAILABLE_ANNOTATION]
    )


# --- shared claims --------------------------------------------------------------------------


def test_a_shared_claim_is_charged_once_and_waits_for_the_claim_to_exist() -> None:
    h = Harness()
    queues(h, gpus=1)
    h.sync_all()
    _, actions = submit(h, "a", [{"name": "shared", "resourceClaimName": "team"}], parallelism=3)
    assert "ResourceClaim ns/team does not exist" in pending_message(actions)
    claim = decode(
        {
            "metadata": {"name": "team", "namespace": "ns"},
            "spec": {
                "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}
            },
        },
        ResourceClaim,
    )
    h.event("ADDED", RESOURCE_CLAIMS, claim)
    (admit,) = of(h.take(), "admit")
    usage = msgspec.json.decode(admit.patch)["status"]["admission"]["podSetAssignments"][0]
    assert usage["count"] == 3
    assert usage["resourceUsage"] == {GPU: "1"}


def test_a_cluster_queue_that_gains_quota_for_the_first_subrequest_makes_it_the_choice() -> None:
    h = Harness()
    queues(h, gpus=1)
    template(h, "alt", MIG_OR_T4)
    h.sync_all()
    reload(h, config_doc({GPU: ["gpu.nvidia.com"], "nvidia.com/mig": ["mig.nvidia.com"]}))
    wl_a, actions = submit(h, "a", [{"name": "g", "resourceClaimTemplateName": "gpu"}])
    (admit_a,) = of(actions, "admit")
    h.reconciler.handle(WriteDone(admit_a, body=msgspec.json.encode(apply_patch(h, wl_a, admit_a))))
    h.take()
    # The ClusterQueue has no MIG quota: b is charged a whole GPU, and waits for a's.
    _, actions = submit(h, "b", [{"name": "g", "resourceClaimTemplateName": "alt"}])
    assert "nvidia.com/gpu" in pending_message(actions)
    # A status-only update of the ClusterQueue changes no choice.
    cq = h.reconciler.cluster_queues["cq"]
    body = msgspec.json.decode(msgspec.json.encode(cq))
    body["status"] = {"pendingWorkloads": 1}
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    assert of(h.take(), "admit") == []
    # It gains MIG quota: the choice is made again, and b is admitted on a MIG slice.
    body["spec"]["resourceGroups"].append(
        {
            "coveredResources": ["nvidia.com/mig"],
            "flavors": [{"name": "t4", "resources": [{"name": "nvidia.com/mig", "nominalQuota": 2}]}],
        }
    )
    h.event("MODIFIED", CLUSTER_QUEUES, decode(body, ClusterQueue))
    (admit_b,) = of(h.take(), "admit")
    usage = msgspec.json.decode(admit_b.patch)["status"]["admission"]["podSetAssignments"][0]["resourceUsage"]
    assert usage == {"nvidia.com/mig": "1"}
