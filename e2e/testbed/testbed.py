"""The test-bed as a Python object: start, stop and restart its components.

    tb = Testbed(run_dir=Path("/tmp/tb"))      # default run dir: paths.default_run_dir()
    tb.start()                                  # builds if needed; blocks until healthy
    tb.kubeconfig                               # admin kubeconfig path
    tb.restart("kube-apiserver")                # same port, same data
    tb.stop_component("driver-gpu-node-1")      # the node's DRA kubelet plugin
    tb.stop()                                   # no process, no listening port left

The methods block (they poll health endpoints); from async code call them
through ``asyncio.to_thread``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from e2e.testbed.binaries import ensure_binaries
from e2e.testbed.components import (
    AGENTS,
    APISERVER,
    CONTROLLER_MANAGER,
    DRIVER_PREFIX,
    ETCD,
    PORT_NAMES,
    REPO_ROOT,
    SCHEDULER,
    START_ORDER,
    ComponentPlan,
    RunLayout,
    driver_component,
    is_driver_component,
    ordered_components,
    plan_components,
    plan_drivers,
)
from e2e.testbed.errors import TestbedError
from e2e.testbed.health import Probe, client_ssl_context, wait_until_healthy
from e2e.testbed.names import DRIVER_NAME
from e2e.testbed.paths import binary_paths, default_run_dir
from e2e.testbed.pki import Pki, generate_pki, write_kubeconfig
from e2e.testbed.ports import free_ports, is_listening
from e2e.testbed.processes import ManagedProcess
from e2e.testbed.runcontrol import any_recorded_running
from e2e.testbed.runstate import ComponentRecord, RunState, save_state
from e2e.testbed.spec import TestbedSpec, default_spec, dump_spec

COMPONENTS = START_ORDER  # the fixed ones; plus one "driver-<node>" per node


_START_ATTEMPTS = 3
_PORT_TAKEN = "address already in use"


def _stderr_echo(message: str) -> None:
    print(f"[testbed] {message}", file=sys.stderr, flush=True)


class Testbed:
    """A local control plane plus the node simulator and fake DRA driver."""

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        run_dir: Path | None = None,
        spec: TestbedSpec | None = None,
        *,
        pod_run_seconds: float | None = None,
        build: bool = True,
        echo: Callable[[str], None] | None = _stderr_echo,
        apiserver_args: tuple[str, ...] = (),
    ) -> None:
        self.layout = RunLayout((run_dir or default_run_dir()).resolve())
        self.spec = spec or default_spec()
        self._pod_run_seconds = pod_run_seconds
        self._apiserver_args = apiserver_args  # extra kube-apiserver flags, e.g. admission plugins
        self._build = build
        self._echo = echo or (lambda _message: None)
        self._processes: dict[str, ManagedProcess] = {}
        self._plans: dict[str, ComponentPlan] = {}
        self._ports: dict[str, int] = {}
        self._pki: Pki | None = None
        self.start_seconds: float | None = None

    # ---- read-only facts -------------------------------------------------
    @property
    def run_dir(self) -> Path:
        return self.layout.run_dir

    @property
    def kubeconfig(self) -> Path:
        return self.layout.kubeconfig

    @property
    def ports(self) -> dict[str, int]:
        return dict(self._ports)

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self._ports[APISERVER]}"

    @property
    def pki(self) -> Pki:
        if self._pki is None:
            raise TestbedError("the test-bed has not been started")
        return self._pki

    @property
    def components(self) -> list[str]:
        """Every component in start order: the fixed ones, then ``driver-<node>`` per node."""
        return ordered_components(list(self._plans))

    def driver_component(self, node_name: str) -> str:
        """The component name of ``node_name``'s DRA kubelet plugin."""
        return driver_component(node_name)

    def log_path(self, component: str) -> Path:
        return self.layout.log(component)

    def pid(self, component: str) -> int | None:
        proc = self._processes.get(component)
        return proc.pid if proc is not None and proc.running() else None

    # ---- lifecycle -----------------------------------------------------------
    def start(self) -> None:
        """Build if needed, start every component, return once all are healthy. A port drawn free
        can be taken by another process before its component binds it: the start is then tried
        again on fresh ports (at most _START_ATTEMPTS times)."""
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                self._start_once()
                return
            except TestbedError as err:
                if attempt == _START_ATTEMPTS or _PORT_TAKEN not in str(err):
                    raise
                self._echo(f"a port was taken before its component bound it; starting again ({attempt})")

    def _start_once(self) -> None:
        if self._processes:
            raise TestbedError("this Testbed is already started")
        if any_recorded_running(self.layout):
            raise TestbedError(
                f"a test-bed already runs in {self.run_dir}; stop it first (python -m e2e.testbed down)"
            )
        self._check_run_dir()
        began = time.monotonic()
        binaries = ensure_binaries() if self._build else binary_paths()
        if binaries.missing():
            raise TestbedError(f"missing binaries: {binaries.missing()}")
        self._prepare_run_dir()
        self._pki = generate_pki(self.layout.pki_dir)
        self._ports = dict(zip(PORT_NAMES, free_ports(len(PORT_NAMES)), strict=True))
        write_kubeconfig(self.kubeconfig, self.server, self._pki)
        self.layout.spec_file.write_text(dump_spec(self.spec))
        self._plans = plan_components(
            binaries, self._pki, self.layout, self._ports, self._pod_run_seconds, self._apiserver_args
        )
        drivers = self._plan_drivers(self.spec)
        self._plans.update(drivers)
        atexit.register(self.stop)
        try:
            self._launch([ETCD])
            self._launch([APISERVER])
            self._launch([CONTROLLER_MANAGER, SCHEDULER, AGENTS, *drivers])
            self._wait_registered(list(drivers))
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        self._echo(f"all components healthy in {self.start_seconds:.1f}s; KUBECONFIG={self.kubeconfig}")

    def stop(self, grace: float | None = None) -> None:
        """Stop every component (reverse order). Safe to call twice. `grace`: the seconds each
        gets between SIGTERM and SIGKILL, for all of them (default: each component's own); 0 for a
        throwaway test-bed whose state no one reads after."""
        atexit.unregister(self.stop)
        errors: list[str] = []
        for name in reversed(ordered_components(list(self._processes))):
            proc = self._processes.pop(name, None)
            if proc is None:
                continue
            try:
                proc.stop(self._plans[name].stop_grace if grace is None else grace)
            except TestbedError as err:
                errors.append(str(err))
        if self._plans:
            self._save_state()
        if errors:
            raise TestbedError("; ".join(errors))

    def stop_component(self, name: str) -> None:
        self._plan(name)
        proc = self._processes.pop(name, None)
        if proc is not None:
            proc.stop(self._plans[name].stop_grace)
            self._echo(f"{name} stopped")
        self._save_state()

    def start_component(self, name: str) -> None:
        self._plan(name)
        if name in self._processes and self._processes[name].running():
            raise TestbedError(f"{name} is already running")
        self._launch([name])
        if name == AGENTS:
            self._wait_registered([n for n in self._processes if is_driver_component(n)])
        elif is_driver_component(name):
            self._wait_registered([name])

    def restart(self, name: str) -> None:
        """Stop and start one component; it keeps its port, data and certificates."""
        self.stop_component(name)
        self.start_component(name)

    def reconfigure(self, spec: TestbedSpec) -> None:
        """Apply another node/GPU spec: rewrite the spec file, restart the agents, stop the
        driver plugins of nodes gone and start those of new nodes."""
        drivers = self._plan_drivers(spec)
        self.spec = spec
        self.layout.spec_file.write_text(dump_spec(spec))
        for name in [n for n in self._plans if is_driver_component(n) and n not in drivers]:
            self.stop_component(name)
            del self._plans[name]
        self.restart(AGENTS)
        new = [n for n in drivers if n not in self._processes]
        self._plans.update(drivers)
        self._launch(new)
        self._wait_registered(new)

    def probe(self, name: str) -> tuple[bool, str]:
        return self._probe(self._plan(name)).check()

    def is_port_listening(self, name: str) -> bool:
        return is_listening(self._ports[name])

    def __enter__(self) -> Testbed:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- internals -------------------------------------------------------
    def _plan(self, name: str) -> ComponentPlan:
        try:
            return self._plans[name]
        except KeyError:
            if not self._plans:
                raise TestbedError("the test-bed has not been started") from None
            raise TestbedError(f"unknown component {name!r}; known: {self.components}") from None

    def _plan_drivers(self, spec: TestbedSpec) -> dict[str, ComponentPlan]:
        plans = plan_drivers(self.layout, spec)
        for node in spec.nodes:
            dirs = self.layout.node(node.name)
            if not dirs.fits():
                raise TestbedError(
                    f"the run folder {self.run_dir} is too deep for unix sockets of node"
                    f" {node.name} (at most 105 bytes: {dirs.socket_paths()[0]}); use a shorter --run-dir"
                )
        return plans

    def _prepare_run_dir(self) -> None:
        run_dir = self.run_dir
        self._check_run_dir()
        run_dir.mkdir(parents=True, exist_ok=True)
        for child in run_dir.iterdir():
            if child.name == "up.pid":
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()
        (run_dir / "logs").mkdir()

    def _check_run_dir(self) -> None:
        """Never clear a folder that is not a test-bed run folder (a typo must not wipe $HOME)."""
        if not self.run_dir.is_dir():
            return
        names = {child.name for child in self.run_dir.iterdir()}
        ours = {"state.json", "pki", "logs", "admin.kubeconfig", "up.pid"}
        if names and not names & ours:
            raise TestbedError(
                f"{self.run_dir} is not empty and does not look like a test-bed"
                " run folder; refusing to clear it"
            )

    def _probe(self, plan: ComponentPlan) -> Probe:
        ctx = client_ssl_context(self.pki) if plan.uses_tls else None
        return Probe(plan.health_url, ctx)

    def _launch(self, names: list[str]) -> None:
        began = time.monotonic()
        started: list[tuple[ManagedProcess, ComponentPlan]] = []
        for name in names:
            plan = self._plan(name)
            proc = ManagedProcess(
                name=name,
                argv=plan.argv,
                log_path=self.layout.log(name),
                pid_path=self.layout.pid(name),
                cwd=REPO_ROOT,
                env=dict(plan.env),
            )
            proc.start()
            self._processes[name] = proc
            started.append((proc, plan))
        self._save_state()
        for proc, plan in started:
            wait_until_healthy(plan.name, self._probe(plan), plan.start_timeout, proc.running, proc.tail)
            self._echo(
                f"{plan.name} healthy (pid {proc.pid}, {self._where(plan.name)},"
                f" {time.monotonic() - began:.1f}s)"
            )

    def _wait_registered(self, drivers: list[str], timeout: float = 30.0) -> None:
        """Wait until the agents' simulated kubelets have registered these driver plugins
        (agents ``/plugins``), so a pod created next finds its driver. No-op while the
        agents are stopped."""
        agents = self._processes.get(AGENTS)
        if not drivers or agents is None or not agents.running():
            return
        wanted = {n: n.removeprefix(DRIVER_PREFIX) for n in drivers}
        url = f"http://127.0.0.1:{self._ports[AGENTS]}/plugins"
        deadline = time.monotonic() + timeout
        body = ""
        while True:
            registered: dict[str, list[str]] = {}
            try:
                with urllib.request.urlopen(url, timeout=2.0) as resp:
                    body = resp.read().decode(errors="replace")
                registered = json.loads(body)
            except (OSError, ValueError) as err:
                body = f"{type(err).__name__}: {err}"
            missing = [c for c, node in wanted.items() if DRIVER_NAME not in registered.get(node, [])]
            if not missing:
                return
            if time.monotonic() > deadline:
                raise TestbedError(
                    f"{missing} not registered with the simulated kubelet after {timeout:.0f}s"
                    f" (agents /plugins: {body[:300]}); agents log tail:\n{agents.tail()}"
                )
            time.sleep(0.1)

    def _where(self, name: str) -> str:
        if is_driver_component(name):
            return f"socket {self._plans[name].health_url.removeprefix('unix:')}"
        return f"port {self._ports['etcd-client' if name == ETCD else name]}"

    def _save_state(self) -> None:
        records = {
            name: ComponentRecord(
                pid=proc.pid or 0,
                executable=proc.executable,
                log=str(proc.log_path),
                health_url=self._plans[name].health_url,
                uses_tls=self._plans[name].uses_tls,
            )
            for name, proc in self._processes.items()
            if proc.pid is not None
        }
        save_state(
            self.layout.state_file,
            RunState(
                server=self.server,
                kubeconfig=str(self.kubeconfig),
                ports=self._ports,
                components=records,
                owner_pid=os.getpid(),
                planned=self.components,
            ),
        )
