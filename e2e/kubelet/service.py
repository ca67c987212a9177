"""The ``kubernetes`` Service for pods on the bridge network, without kube-proxy.

The test-bed's API server listens on 127.0.0.1 only, and its serving certificate names
127.0.0.1 and 10.0.0.1 (the Service's ClusterIP). The kubelet gives every container
KUBERNETES_SERVICE_HOST=10.0.0.1 and PORT=443, so in-cluster clients (the controller's
Deployment from manifests/, the driver's DaemonSet) dial 10.0.0.1:443. One iptables rule does
what kube-proxy would: DNAT of 10.0.0.1:443 arriving from the pods' bridge to the API
server's 127.0.0.1 port, with ``route_localnet`` on the bridge so the kernel accepts a
loopback destination from it (the kubelet's KUBE-FIREWALL chain lets DNATed connections to
127.0.0.0/8 through). TLS still ends at the API server. (A user-space relay in the test
process was tried first: under CPU contention its latency made the leader miss its Lease
renewals.)
"""

from __future__ import annotations

import subprocess
from pathlib import Path

SERVICE_IP = "10.0.0.1"
COMMENT = "dra-quota-testbed kubernetes Service"


class ServiceForwarder:
    def __init__(self, target_port: int, bridge: str, ip: str = SERVICE_IP, port: int = 443) -> None:
        self.target_port = target_port
        self.bridge = bridge
        self.ip = ip
        self.port = port
        self._rule: list[str] | None = None

    def _spec(self) -> list[str]:
        return [
            "PREROUTING", "-i", self.bridge, "-d", f"{self.ip}/32", "-p", "tcp", "--dport", str(self.port),
            "-m", "comment", "--comment", COMMENT,
            "-j", "DNAT", "--to-destination", f"127.0.0.1:{self.target_port}",
        ]  # fmt: skip

    def start(self) -> None:
        Path(f"/proc/sys/net/ipv4/conf/{self.bridge}/route_localnet").write_text("1\n")
        rule = self._spec()
        result = subprocess.run(["iptables", "-t", "nat", "-A", *rule], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"iptables -t nat -A {' '.join(rule)}: {result.stderr.strip()}")
        self._rule = rule

    def stop(self) -> None:
        if self._rule is not None:
            subprocess.run(["iptables", "-t", "nat", "-D", *self._rule], capture_output=True)
            self._rule = None
