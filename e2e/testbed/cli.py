"""``python -m e2e.testbed up|down|status|agents``."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

import msgspec

from e2e.testbed.components import START_ORDER, RunLayout, ordered_components
from e2e.testbed.errors import TestbedError
from e2e.testbed.paths import default_run_dir
from e2e.testbed.ports import is_listening
from e2e.testbed.runcontrol import any_recorded_running, recorded_status, stop_recorded
from e2e.testbed.runstate import load_state
from e2e.testbed.spec import TestbedSpec, default_spec, load_spec
from e2e.testbed.testbed import Testbed


def _err(message: str) -> None:
    print(f"[testbed] {message}", file=sys.stderr, flush=True)


def _layout(args: argparse.Namespace) -> RunLayout:
    return RunLayout((args.run_dir or default_run_dir()).resolve())


def _spec(args: argparse.Namespace) -> TestbedSpec:
    spec = load_spec(args.spec) if args.spec else default_spec()
    if args.pod_run_seconds is not None:
        spec = msgspec.structs.replace(spec, pod_run_seconds=args.pod_run_seconds)
    return spec


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    # Further signals must not interrupt the shutdown that follows.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


def cmd_up(args: argparse.Namespace) -> int:
    layout = _layout(args)
    if any_recorded_running(layout):
        _err(f"a test-bed already runs in {layout.run_dir}; run `python -m e2e.testbed down`")
        return 1
    layout.run_dir.mkdir(parents=True, exist_ok=True)
    layout.owner_pid_file.write_text(f"{os.getpid()}\n")
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    testbed = Testbed(layout.run_dir, _spec(args), build=not args.no_build)
    try:
        testbed.start()
        print(f"export KUBECONFIG={testbed.kubeconfig}", flush=True)
        _err(f"running; logs in {layout.run_dir / 'logs'}; stop with Ctrl-C or `python -m e2e.testbed down`")
        reported: set[str] = set()
        while True:
            time.sleep(1.0)
            for name in testbed.components:
                if testbed.pid(name) is None and name not in reported:
                    reported.add(name)
                    _err(f"{name} is not running any more; see {testbed.log_path(name)}")
    except KeyboardInterrupt:
        _err("stopping")
    except TestbedError as err:
        _err(f"error: {err}")
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            testbed.stop()
        finally:
            with contextlib.suppress(FileNotFoundError):
                layout.owner_pid_file.unlink()
    _err("stopped")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    layout = _layout(args)
    state = load_state(layout.state_file)
    stopped = stop_recorded(layout)
    if stopped:
        _err(f"stopped left-over components: {', '.join(stopped)}")
    ports = list(state.ports.values()) if state is not None else []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        busy = [p for p in ports if is_listening(p)]
        if not busy:
            _err(f"down: nothing runs in {layout.run_dir}")
            return 0
        time.sleep(0.2)
    _err(f"down: ports still listening: {busy}")
    return 1


def cmd_status(args: argparse.Namespace) -> int:
    layout = _layout(args)
    statuses = recorded_status(layout)
    state = load_state(layout.state_file)
    if state is not None:
        print(f"run dir:    {layout.run_dir}\nkubeconfig: {state.kubeconfig}\nserver:     {state.server}")
    by_name = {s.name: s for s in statuses}
    all_ok = True
    names = ordered_components([*(state.planned if state is not None else START_ORDER), *by_name])
    for name in names:
        st = by_name.get(name)
        if st is None:
            print(f"{name:25} stopped")
            all_ok = False
            continue
        state_word = "healthy" if st.healthy else ("unhealthy" if st.running else "stopped")
        all_ok = all_ok and st.healthy
        detail = "" if st.healthy else f"  ({st.detail})"
        where = f"port {st.port}" if st.port is not None else "socket"
        print(f"{name:25} {state_word:9} pid {st.pid:<8} {where}{detail}")
    return 0 if all_ok else 1


def cmd_agents(args: argparse.Namespace) -> int:
    from e2e.testbed.agents import main as agents_main  # imported late: keeps `up` light

    agents_main(args.kubeconfig, _spec(args), args.health_port, args.nodes_dir)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.testbed",
        description="Local Kubernetes control plane with a node simulator and a fake NVIDIA DRA driver.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def run_dir_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--run-dir", type=Path, default=None, help="run folder (default: $TESTBED_RUN_DIR or <cache>/run)"
        )

    def spec_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("--spec", type=Path, default=None, help="node/GPU spec (YAML)")
        p.add_argument(
            "--pod-run-seconds", type=float, default=None, help="default pod run time (overrides the spec)"
        )

    up = sub.add_parser("up", help="start everything and stay in the foreground")
    run_dir_arg(up)
    spec_args(up)
    up.add_argument("--no-build", action="store_true", help="fail instead of building")
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", help="stop what `up` started")
    run_dir_arg(down)
    down.set_defaults(func=cmd_down)

    status = sub.add_parser("status", help="components, ports, health; exit 1 if not all ok")
    run_dir_arg(status)
    status.set_defaults(func=cmd_status)

    agents = sub.add_parser("agents", help="(internal) node simulator + fake DRA driver")
    agents.add_argument("--kubeconfig", type=Path, required=True)
    agents.add_argument("--health-port", type=int, required=True)
    agents.add_argument(
        "--nodes-dir",
        type=Path,
        default=None,
        help="<run>/nodes: the nodes' plugin registry dirs (DRA prepare)",
    )
    spec_args(agents)
    agents.set_defaults(func=cmd_agents)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except TestbedError as err:
        _err(f"error: {err}")
        return 1
    return code
