"""A ResourceClaimTemplate created after its Job, through the reconciler and the in-memory API: the
Job's Workload waits with the field error Kueue gives for a missing template, and is charged and
admitted when the template appears, with no other event (no tick, no change to the Job or the
Workload)."""

from __future__ import annotations

from reconciler.api.resources import RESOURCE_CLAIM_TEMPLATES

from tests.support.memory_cluster import Cluster
from tests.support.memory_cluster import condition
from tests.support.memory_cluster import gpu_template

MISSING = (
    "spec.podSets[0].template.spec.resourceClaims[0]: Internal error: failed to get claim spec for "
    'ResourceClaimTemplate gpu in podset main: resourceclaimtemplates.resource.k8s.io "gpu" not found'
)


def test_a_workload_waiting_for_its_template_is_admitted_when_the_template_appears() -> None:
    c = Cluster()
    c.queues(gpus=2, template=False)
    c.submit("a")
    waiting = c.workload("a")
    assert condition(waiting, "QuotaReserved") == ("False", "Inadmissible", MISSING)
    assert condition(waiting, "Requeued") == ("False", "Inadmissible", MISSING)
    assert waiting["status"].get("admission") is None
    assert c.job("a")["spec"]["suspend"] is True
    assert c.used_gpus() == 0
    # Only the template is created; what follows is the reconciler's own writes and their events.
    c.api.add(RESOURCE_CLAIM_TEMPLATES, gpu_template(count=2))
    performed = c.settle()
    assert [a.purpose for a in performed if a.purpose == "admit"] == ["admit"]
    admitted = c.workload("a")
    assert condition(admitted, "QuotaReserved") == (
        "True",
        "QuotaReserved",
        "Quota reserved in ClusterQueue cq",
    )
    assert admitted["status"]["admission"]["podSetAssignments"][0]["resourceUsage"] == {"nvidia.com/gpu": "2"}
    assert c.job("a")["spec"]["suspend"] is False
    assert c.used_gpus() == 2
