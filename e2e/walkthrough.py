"""The walkthrough on the local test-bed: `python -m e2e.walkthrough`.

Starts the test-bed (a real control plane, one simulated node with one Tesla
T4 and the fake DRA driver), installs the CRDs, starts the controller with
examples/walkthrough/00-configuration.yaml, applies the walkthrough in order
and prints what a user would check with kubectl: the Jobs, the Workloads with
their conditions, the ClusterQueue's usage and the ResourceClaim. Then it
waits for job A to finish and shows job B admitted in its place. Last, it
restarts the controller with a 15 s waitForPodsReady timeout and shows a Job
whose pod never becomes ready evicted, suspended and requeued (item 8).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from pathlib import Path
from typing import Any

from e2e.support.deploy import ROOT, ControllerProcess, apply_manifests, install_crds
from e2e.testbed import KubeClient, Testbed, api_path
from e2e.testbed.paths import cache_dir

EXAMPLES = ROOT / "examples" / "walkthrough"
NAMESPACE = "p3-dra-demo"
Obj = dict[str, Any]


def _age(stamp: str | None) -> str:
    if not stamp:
        return ""
    then = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    seconds = int((dt.datetime.now(dt.UTC) - then).total_seconds())
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m"


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows)


def _condition(obj: Obj, kind: str) -> Obj:
    for c in obj.get("status", {}).get("conditions", []) or []:
        if c.get("type") == kind:
            return dict(c)
    return {}


async def show(kube: KubeClient) -> None:
    jobs = (await kube.get(api_path("batch/v1", "jobs", NAMESPACE)))["items"]
    print("$ kubectl get jobs -n p3-dra-demo")
    rows = [["NAME", "SUSPENDED", "ACTIVE", "SUCCEEDED", "NODE SELECTOR"]]
    for job in jobs:
        spec, status = job["spec"], job.get("status", {})
        selector = job["spec"]["template"]["spec"].get("nodeSelector", {})
        rows.append(
            [
                job["metadata"]["name"],
                str(spec.get("suspend", False)),
                str(status.get("active", 0)),
                str(status.get("succeeded", 0)),
                ",".join(f"{k}={v}" for k, v in selector.items()),
            ]
        )
    print(_table(rows), end="\n\n")

    workloads = (await kube.get(api_path("kueue.x-k8s.io/v1beta2", "workloads", NAMESPACE)))["items"]
    print("$ kubectl get workload -n p3-dra-demo")
    rows = [["NAME", "QUEUE", "RESERVED IN", "ADMITTED", "FINISHED", "AGE"]]
    for wl in workloads:
        admission = wl.get("status", {}).get("admission") or {}
        rows.append(
            [
                f"workload.kueue.x-k8s.io/{wl['metadata']['name']}",
                wl["spec"].get("queueName", ""),
                admission.get("clusterQueue", ""),
                _condition(wl, "Admitted").get("status", ""),
                _condition(wl, "Finished").get("status", ""),
                _age(wl["metadata"].get("creationTimestamp")),
            ]
        )
    print(_table(rows), end="\n\n")
    for wl in workloads:
        quota = _condition(wl, "QuotaReserved")
        print(f"{wl['metadata']['name']}: QuotaReserved={quota.get('status')} reason={quota.get('reason')}")
        print(f"  message: {quota.get('message')}")
        admission = wl.get("status", {}).get("admission")
        if admission:
            for psa in admission["podSetAssignments"]:
                print(
                    f"  admission: clusterQueue={admission['clusterQueue']} podSet={psa['name']} "
                    f"count={psa.get('count')} flavors={psa.get('flavors')} usage={psa.get('resourceUsage')}"
                )
        for request in wl.get("status", {}).get("resourceRequests", []) or []:
            print(f"  resourceRequests: {request['name']}: {request.get('resources')}")
        for kind in ("PodsReady", "Evicted", "Requeued"):
            cond = _condition(wl, kind)
            if cond:
                print(f"  {kind}={cond.get('status')} reason={cond.get('reason')}: {cond.get('message')}")
        requeue = wl.get("status", {}).get("requeueState")
        if requeue:
            print(f"  requeueState: count={requeue.get('count')} requeueAt={requeue.get('requeueAt')}")
    print()

    cq = await kube.get(api_path("kueue.x-k8s.io/v1beta2", "clusterqueues", name="p3-dra-cq"))
    status = cq.get("status", {})
    print("$ kubectl get clusterqueue p3-dra-cq -o yaml   # status")
    print(
        f"  admittedWorkloads: {status.get('admittedWorkloads')}  pendingWorkloads: "
        f"{status.get('pendingWorkloads')}  reservingWorkloads: {status.get('reservingWorkloads')}"
    )
    for flavor in status.get("flavorsUsage", []) or []:
        usage = ", ".join(f"{r['name']}={r.get('total')}" for r in flavor.get("resources", []))
        print(f"  flavorsUsage {flavor['name']}: {usage}")
    print()

    claims = (await kube.get(api_path("resource.k8s.io/v1", "resourceclaims", NAMESPACE)))["items"]
    print("$ kubectl get resourceclaims -n p3-dra-demo")
    rows = [["NAME", "STATE", "DEVICE", "RESERVED FOR"]]
    for claim in claims:
        allocation = claim.get("status", {}).get("allocation")
        results = (allocation or {}).get("devices", {}).get("results", [])
        reserved = claim.get("status", {}).get("reservedFor", []) or []
        state = "allocated,reserved" if allocation and reserved else "allocated" if allocation else "pending"
        rows.append(
            [
                claim["metadata"]["name"],
                state,
                ",".join(f"{r['pool']}/{r['device']}" for r in results),
                ",".join(r.get("name", "") for r in reserved),
            ]
        )
    print(_table(rows), end="\n\n")


async def _wait(kube: KubeClient, what: str, check: Any, within: float = 120.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while loop.time() < deadline:
        if await check():
            return
        await asyncio.sleep(0.5)
    raise TimeoutError(f"timed out after {within:.0f}s waiting for {what}")


async def _job(kube: KubeClient, name: str) -> Obj | None:
    return await kube.get_or_none(api_path("batch/v1", "jobs", NAMESPACE, name))


async def walkthrough(bed: Testbed, controller: ControllerProcess) -> None:
    async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
        print("== installing the CRDs and starting the controller")
        await install_crds(kube)
        controller.start()
        print("== applying 10-queues.yaml, 20-resourceclaimtemplate.yaml, 30-job-running-a.yaml")
        await apply_manifests(
            kube,
            EXAMPLES / "10-queues.yaml",
            EXAMPLES / "20-resourceclaimtemplate.yaml",
            EXAMPLES / "30-job-running-a.yaml",
        )

        async def a_running() -> bool:
            job = await _job(kube, "kueue-dra-running-a")
            return bool(job and job.get("status", {}).get("ready", 0))

        await _wait(kube, "job A to run", a_running)
        print("== job A runs; applying 31-job-pending-b.yaml")
        await apply_manifests(kube, EXAMPLES / "31-job-pending-b.yaml")

        async def b_pending() -> bool:
            wls = (await kube.get(api_path("kueue.x-k8s.io/v1beta2", "workloads", NAMESPACE)))["items"]
            return any(
                w["metadata"]["name"].startswith("job-kueue-dra-pending-b-")
                and _condition(w, "QuotaReserved").get("reason") == "Pending"
                for w in wls
            )

        await _wait(kube, "job B's Workload to wait for quota", b_pending)
        await asyncio.sleep(1.5)  # let the ClusterQueue status catch up
        print("\n== job A admitted and running, job B waiting for quota\n")
        await show(kube)

        async def b_running() -> bool:
            job = await _job(kube, "kueue-dra-pending-b")
            return bool(job and not job["spec"].get("suspend") and job.get("status", {}).get("ready", 0))

        print("== waiting for job A to finish (the simulated pod runs 30 s) ...")
        await _wait(kube, "job B to be admitted and run after job A", b_running, within=180)
        await asyncio.sleep(1.5)
        print("\n== job A finished: its quota went back and job B was admitted\n")
        await show(kube)


async def stalled_job(bed: Testbed, controller: ControllerProcess) -> None:
    """Item 8: a Job whose pod never becomes ready is evicted, re-suspended and requeued."""
    async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
        print(
            "== item 8: restarting the controller with examples/pods-ready/00-configuration.yaml"
            " (waitForPodsReady timeout 15 s)"
        )
        controller.start()
        print("== applying examples/pods-ready/10-job-stalled-c.yaml (its pod never becomes ready)")
        await apply_manifests(kube, ROOT / "examples/pods-ready/10-job-stalled-c.yaml")

        async def evicted() -> bool:
            wls = (await kube.get(api_path("kueue.x-k8s.io/v1beta2", "workloads", NAMESPACE)))["items"]
            return any(
                w["metadata"]["name"].startswith("job-kueue-dra-stalled-c-")
                and _condition(w, "Evicted").get("status") == "True"
                for w in wls
            )

        print("== waiting for job B to finish, job C to be admitted, and C's 15 s to run out ...")
        await _wait(kube, "job C to be evicted after the PodsReady timeout", evicted, within=180)
        await asyncio.sleep(1.5)
        print("\n== job C evicted: suspended again, its quota released, requeued after the backoff\n")
        await show(kube)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.walkthrough", description=__doc__)
    parser.add_argument("--run-dir", type=Path, default=cache_dir() / "walkthrough")
    parser.add_argument("--keep", action="store_true", help="keep everything running until Ctrl-C")
    args = parser.parse_args(argv)
    bed = Testbed(run_dir=args.run_dir)
    print(f"== starting the test-bed in {args.run_dir} (builds the binaries on first use)")
    bed.start()
    controller = ControllerProcess(
        EXAMPLES / "00-configuration.yaml", bed.kubeconfig, args.run_dir / "logs" / "controller.log"
    )
    code = 0
    try:
        asyncio.run(walkthrough(bed, controller))
        controller.stop()
        controller = ControllerProcess(
            ROOT / "examples/pods-ready/00-configuration.yaml",
            bed.kubeconfig,
            args.run_dir / "logs" / "controller.log",
        )
        asyncio.run(stalled_job(bed, controller))
        if args.keep:
            print(
                f"export KUBECONFIG={bed.kubeconfig}\n(controller log: {controller.log_path}; Ctrl-C stops)"
            )
            asyncio.run(asyncio.Event().wait())
    except KeyboardInterrupt:
        pass
    except Exception as err:  # a demo: say what failed and where to look
        print(f"walkthrough failed: {err}\ncontroller log tail:\n{controller.log_tail()}", file=sys.stderr)
        code = 1
    finally:
        controller.stop()
        bed.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
