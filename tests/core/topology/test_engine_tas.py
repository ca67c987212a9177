"""Topology-aware admission in the core (the Engine): with the Topology and the nodes fed, a TAS
flavor is placed on; each admitted Workload's status carries its topologyAssignment, the next sees
what it took, one that fits no domain waits with Kueue's message and is admitted once the rack
frees. Without the nodes fed (the controller today), the TAS flavor stays refused by name."""

from __future__ import annotations

from typing import Any

from reconciler.api import ClusterQueue, ResourceFlavor, Topology, WorkloadStatus
from reconciler.core.engine import Engine
from reconciler.core.model.clusterqueues import compile_cluster_queue
from reconciler.core.model.workloads import compile_workload
from reconciler.core.scheduling.scheduler import Admit, Pending, Preempt
from reconciler.core.status import admitted_workload_status
from reconciler.core.topology.assignment import decode_assignment
from reconciler.core.topology.domains import HOSTNAME, TopologyNode
from reconciler.integrations.batchjob import workload_for_job
from tests.support.builders import cluster_queue, cluster_queue_body, decode, job, job_body

GPU = "nvidia.com/gpu"
RACK = "cloud.com/topology-rack"
RACKS = {"n1": "r1", "n2": "r1", "n3": "r2", "n4": "r2"}
TOPOLOGY: Topology = decode(
    {"metadata": {"name": "default"}, "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": HOSTNAME}]}},
    Topology,
)


def tas_flavor(name: str = "tas", topology: str | None = "default") -> ResourceFlavor:
    spec: dict[str, Any] = {"nodeLabels": {"pool": "gpu"}}
    if topology:
        spec["topologyName"] = topology
    result: ResourceFlavor = decode({"metadata": {"name": name}, "spec": spec}, ResourceFlavor)
    return result


def nodes() -> list[TopologyNode]:
    """2 racks of 2 nodes with 2 GPUs each."""
    return [
        TopologyNode(n, {RACK: r, HOSTNAME: n, "pool": "gpu"}, {"cpu": 8000, "pods": 110, GPU: 2})
        for n, r in RACKS.items()
    ]


def engine(fed: bool = True, flavor: ResourceFlavor | None = None) -> Engine:
    state = Engine()
    state.set_flavor(flavor or tas_flavor())
    state.set_namespace("ns", {})
    state.set_cluster_queue(cluster_queue("cq", [((flavor or tas_flavor()).metadata.name, {GPU: 16})]))
    state.set_local_queue("ns", "lq", "cq")
    if fed:
        state.set_topology(TOPOLOGY)
        state.set_topology_nodes(nodes())
    return state


def gpu_job(name: str, annotations: dict[str, str] | None = None) -> Any:
    body = job_body(name, uid=f"uid-{name}", parallelism=4, completions=4, requests={GPU: "1"})
    if annotations is not None:
        body["spec"]["template"].setdefault("metadata", {})["annotations"] = annotations
    info = compile_workload(
        workload_for_job(decode(body, type(job("x")))), lookup_template=lambda ns, n: None, mappings={}
    )
    assert info.problem is None, info.problem
    return info


REQUIRED_RACK = {"kueue.x-k8s.io/podset-required-topology": RACK}


def hosts(decision: Admit) -> dict[str, int]:
    (pod_set,) = decision.pod_sets
    assert pod_set.topology is not None
    return {d.values[-1]: d.count for d in decode_assignment(pod_set.topology).domains}


def test_required_rack_workloads_take_one_rack_each_the_third_waits_until_one_frees() -> None:
    state = engine()
    for name in ("a", "b", "c"):
        state.add_workload(gpu_job(name, REQUIRED_RACK))
    decisions = {d.key[1].split("-")[1]: d for d in state.schedule()}
    first, second, third = decisions["a"], decisions["b"], decisions["c"]
    assert isinstance(first, Admit)
    assert isinstance(second, Admit)
    assert hosts(first) == {"n1": 2, "n2": 2}
    assert hosts(second) == {"n3": 2, "n4": 2}
    assert isinstance(third, Pending)
    assert third.message == (
        "couldn't assign flavors to pod set main: topology \"default\" doesn't allow to fit any of 4 "
        'pod(s). Total nodes: 4; excluded: resource "nvidia.com/gpu": 4'
    )
    # The admission as the Workload's status records it, and read back by the engine.
    status = admitted_workload_status(WorkloadStatus(), first, "2026-12-07T00:00:00Z")
    assert status.admission is not None
    assert status.admission.pod_set_assignments[0].topology_assignment == first.pod_sets[0].topology
    state.add_workload(gpu_job("a", REQUIRED_RACK), status.admission)
    assert state.schedule() == []  # nothing freed: "c" still waits
    state.remove_workload(second.key)
    (admitted,) = [d for d in state.schedule() if isinstance(d, Admit)]
    assert admitted.key == third.key
    assert hosts(admitted) == {"n3": 2, "n4": 2}


def test_without_the_nodes_fed_the_tas_flavor_stays_refused_by_name() -> None:
    state = engine(fed=False)
    state.add_workload(gpu_job("a", REQUIRED_RACK))
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert "flavor tas has spec.topologyName default: topology-aware scheduling needs the nodes" in (
        decision.message
    )


def test_a_topology_request_on_a_plain_flavor_waits_with_kueues_words() -> None:
    state = engine(flavor=tas_flavor("plain", topology=None))
    state.add_workload(gpu_job("a", REQUIRED_RACK))
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert decision.message == (
        'couldn\'t assign flavors to pod set main: Flavor "plain" does not support TopologyAwareScheduling'
    )


def test_a_tas_only_cluster_queue_places_a_pod_set_without_a_request() -> None:
    state = engine()
    state.add_workload(gpu_job("a"))
    (decision,) = state.schedule()
    assert isinstance(decision, Admit)
    assert sum(hosts(decision).values()) == 4


def test_a_cluster_queue_whose_tas_flavors_topology_is_not_known_is_inactive_until_it_comes() -> None:
    """Kueue's TopologyNotFound: the ClusterQueue is not active, its workloads wait with Kueue's
    inactive message (not a flavor-assignment message), and are admitted once the Topology comes."""
    state = engine(fed=False)
    state.set_topology_nodes(nodes())  # the nodes, but no Topology "default"
    assert state.cache.cluster_queue_active("cq") == (
        "False",
        "TopologyNotFound",
        'Can\'t admit new workloads: there is no Topology "default" for TAS flavor "tas".',
    )
    state.add_workload(gpu_job("a", REQUIRED_RACK))
    (decision,) = state.schedule()
    assert isinstance(decision, Pending)
    assert decision.message == "ClusterQueue cq is inactive"
    state.set_topology(TOPOLOGY)
    assert state.cache.cluster_queue_active("cq")[0] == "True"
    (decision,) = state.schedule()
    assert isinstance(decision, Admit)


def test_only_the_kinds_whose_pods_are_placed_may_use_a_tas_flavor() -> None:
    """The controller places only the pods of the kinds it is told of (batch/v1 Jobs here): a
    Workload of another owner is refused by name on a TAS flavor (never admitted without its pods
    being held), a Job's is placed."""
    state = engine()
    state.cache.topology_owners = frozenset({("batch/v1", "Job")})
    job_info = gpu_job("a", REQUIRED_RACK)
    assert job_info.owner == ("batch/v1", "Job")
    other = gpu_job("b", REQUIRED_RACK)
    other.owner = ("ray.io/v1", "RayJob")
    other.shape += b"other"
    state.add_workload(job_info)
    state.add_workload(other)
    decisions = {d.key[1].split("-")[1]: d for d in state.schedule()}
    assert isinstance(decisions["a"], Admit)
    refused = decisions["b"]
    assert isinstance(refused, Pending)
    assert refused.message == (
        "couldn't assign flavors to pod set main: flavor tas has spec.topologyName default: "
        "topology-aware scheduling is supported for batch/v1 Jobs and JobSets only by this controller"
    )


def _sized(name: str, pods: int, priority: int) -> Any:
    body = job_body(name, uid=f"uid-{name}", parallelism=pods, completions=pods, requests={GPU: "1"})
    body["spec"]["template"].setdefault("metadata", {})["annotations"] = REQUIRED_RACK
    info = compile_workload(
        workload_for_job(decode(body, type(job("x")))), lookup_template=lambda ns, n: None, mappings={}
    )
    info.priority = priority
    return info


def preempting_engine(gpus: int) -> Engine:
    """The fed TAS engine with `gpus` of quota, lower priorities preempted within the ClusterQueue."""
    state = Engine()
    state.set_flavor(tas_flavor())
    state.set_namespace("ns", {})
    body = cluster_queue_body("cq", [("tas", {GPU: gpus})])
    body["spec"]["preemption"] = {"withinClusterQueue": "LowerPriority"}
    state.set_cluster_queue(compile_cluster_queue(decode(body, ClusterQueue)))
    state.set_local_queue("ns", "lq", "cq")
    state.set_topology(TOPOLOGY)
    state.set_topology_nodes(nodes())
    return state


def test_a_workload_the_domains_cannot_hold_preempts_lower_ones_until_a_rack_frees() -> None:
    """Kueue's TAS preemption: quota fits, no rack has four free GPUs, an empty one would: the
    lower-priority workload admitted last is preempted, the other stays."""
    state = preempting_engine(gpus=16)
    for name in ("a", "b"):
        state.add_workload(_sized(name, 3, priority=1))
        (admitted,) = [d for d in state.schedule() if isinstance(d, Admit)]
        state.add_workload(
            _sized(name, 3, priority=1),
            admitted_workload_status(WorkloadStatus(), admitted, "2026-12-07T00:00:00Z").admission,
        )
    state.add_workload(_sized("c", 4, priority=10))
    decisions = state.schedule()
    (preempt,) = [d for d in decisions if isinstance(d, Preempt)]
    assert [t.key[1].split("-")[1] for t in preempt.targets] == ["b"]
    (pending,) = [d for d in decisions if isinstance(d, Pending)]
    assert pending.message.endswith(". Pending the preemption of 1 workload(s)")
    assert "allows to fit only 1 out of 4 pod(s)" in pending.message
    state.remove_workload(preempt.targets[0].key)
    (admitted,) = [d for d in state.schedule() if isinstance(d, Admit)]
    assert admitted.key[1].split("-")[1] == "c"
    assert sum(hosts(admitted).values()) == 4


def test_a_workload_an_empty_topology_cannot_hold_waits_without_preempting() -> None:
    state = engine()
    state.add_workload(_sized("huge", 9, priority=10))  # 8 GPUs in all: never placeable
    decisions = state.schedule()
    assert [type(d) for d in decisions] == [Pending]


def test_short_of_quota_one_no_empty_topology_could_hold_does_not_preempt() -> None:
    """Kueue's no fit: nine one-GPU pods in one rack cannot be placed in any rack, even empty, so
    though preemption could give it the quota, nobody is preempted for it."""
    state = preempting_engine(gpus=9)
    state.add_workload(_sized("low", 3, priority=1))
    (admitted,) = [d for d in state.schedule() if isinstance(d, Admit)]
    status = admitted_workload_status(WorkloadStatus(), admitted, "2026-12-07T00:00:00Z")
    state.add_workload(_sized("low", 3, priority=1), status.admission)
    state.add_workload(_sized("huge", 9, priority=10))
    (pending,) = state.schedule()
    assert isinstance(pending, Pending)
    assert pending.message.startswith("couldn't assign flavors to pod set main: insufficient unused quota")
