"""``python -m e2e.kubelet smoke|up [--run-dir DIR]`` (root; after ``e2e/build-binaries.sh --node``).

smoke: the control plane, containerd + kubelet, the fake driver's kubelet plugin, a busybox
       pod run to completion and its log read back through the API server; then stop.
up:    the same without the pod, kept running until Ctrl-C (prints the KUBECONFIG).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from e2e.kubelet.bed import RealKubeletBed, run_pod
from e2e.kubelet.images import BUSYBOX_IMAGE
from e2e.testbed import KubeClient
from e2e.testbed.paths import cache_dir


async def _smoke(bed: RealKubeletBed) -> str:
    async with KubeClient.from_kubeconfig(bed.kubeconfig) as kube:
        return await run_pod(
            kube, "default", "busybox-smoke", BUSYBOX_IMAGE, "echo hello from a real container; env"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.kubelet", description=__doc__)
    parser.add_argument("command", choices=["smoke", "up"])
    parser.add_argument("--run-dir", type=Path, default=cache_dir() / "real-kubelet")
    args = parser.parse_args(argv)
    bed = RealKubeletBed(args.run_dir.resolve())
    t0 = time.monotonic()
    try:
        bed.start()
        for what, seconds in bed.timings.items():
            print(f"== {what}: {seconds:.1f}s", flush=True)
        if args.command == "smoke":
            t1 = time.monotonic()
            log = asyncio.run(_smoke(bed))
            print(f"== busybox pod ran in {time.monotonic() - t1:.1f}s; its log:\n{log}", flush=True)
        else:
            print(
                f"export KUBECONFIG={bed.kubeconfig}\n(logs in {args.run_dir}/node/logs; Ctrl-C stops)",
                flush=True,
            )
            asyncio.run(asyncio.Event().wait())
    except KeyboardInterrupt:
        pass
    except Exception as err:
        print(f"failed: {err}", file=sys.stderr)
        return 1
    finally:
        bed.stop()
        print(f"== total {time.monotonic() - t0:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
