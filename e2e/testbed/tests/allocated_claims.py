"""A ResourceClaim as the scheduler allocated it on gpu-node-1, and what the kubelet plugin
answers for it: shared by the kubelet plugin's tests and the simulated kubelets' tests."""

from __future__ import annotations

from e2e.testbed.fakedriver import gpu_uuid
from e2e.testbed.kubeclient import Obj
from e2e.testbed.kubeletplugin import ClaimRef, PluginConfig, PreparedDevice
from e2e.testbed.scenario import single_gpu_claim_spec

NODE = "gpu-node-1"
DRIVER = "gpu.nvidia.com"
NS = "team-a"
CLAIM_UID = "6f1d9b4e-2c3a-4f5e-9a8b-0c1d2e3f4a5b"
POD_UID = "0a7c3e55-9d2b-4e61-8f0a-1b2c3d4e5f60"
T4_UUID = gpu_uuid(NODE, 0)


def allocated_claim(
    *,
    uid: str = CLAIM_UID,
    name: str = "job-a-0-gpu-x7k2p",
    results: list[Obj] | None = None,
    allocated: bool = True,
) -> Obj:
    """A ResourceClaim as the API server returns it after the scheduler allocated it."""
    if results is None:
        results = [{"request": "gpu", "driver": DRIVER, "pool": NODE, "device": "gpu-0"}]
    claim: Obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": uid,
            "resourceVersion": "4711",
            "generateName": "job-a-0-gpu-",
            "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "job-a-0",
                    "uid": POD_UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "finalizers": ["resource.kubernetes.io/delete-protection"],
        },
        "spec": single_gpu_claim_spec(),
        "status": {},
    }
    if allocated:
        claim["status"] = {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}
                    ]
                },
                "allocationTimestamp": "2026-11-29T18:00:00Z",
            },
            "reservedFor": [{"resource": "pods", "name": "job-a-0", "uid": POD_UID}],
        }
    return claim


def ref(claim: Obj) -> ClaimRef:
    meta = claim["metadata"]
    return ClaimRef(namespace=meta["namespace"], uid=meta["uid"], name=meta["name"])


def cdi_id(claim_uid: str, device: str) -> str:
    return f"k8s.gpu.nvidia.com/gpu={claim_uid}-{device}"


def expected_device(
    claim_uid: str = CLAIM_UID, device: str = "gpu-0", request: str = "gpu"
) -> PreparedDevice:
    """A device as the kubelet sees it in the response (no uuid on the wire)."""
    return PreparedDevice(
        request_names=(request,),
        pool_name=NODE,
        device_name=device,
        cdi_device_ids=(cdi_id(claim_uid, device),),
    )


def cdi_files(config: PluginConfig) -> list[str]:
    return sorted(p.name for p in config.cdi_dir.iterdir())
