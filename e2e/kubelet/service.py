"""The ``kubernetes`` Service for pods on the bridge network, without kube-proxy.

The test-bed's API server listens on 127.0.0.1 only, and its serving certificate names
127.0.0.1 and 10.0.0.1 (the Service's ClusterIP). The kubelet gives every container
KUBERNETES_SERVICE_HOST=10.0.0.1 and PORT=443, so in-cluster clients (the controller's
Deployment from manifests/) dial 10.0.0.1:443. Here 10.0.0.1/32 is added to the host's
loopback interface and a forwarder on 10.0.0.1:443 relays each connection to the API
server: pods reach it through the bridge's gateway, TLS still ends at the API server.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading

SERVICE_IP = "10.0.0.1"


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


class ServiceForwarder:
    def __init__(self, target_port: int, ip: str = SERVICE_IP, port: int = 443) -> None:
        self.target_port = target_port
        self.ip = ip
        self.port = port
        self._listener: socket.socket | None = None
        self._added_address = False
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        result = subprocess.run(
            ["ip", "addr", "add", f"{self.ip}/32", "dev", "lo"], capture_output=True, text=True
        )
        if result.returncode == 0:
            self._added_address = True
        elif "File exists" not in result.stderr:
            raise RuntimeError(f"ip addr add {self.ip}/32 dev lo: {result.stderr.strip()}")
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.ip, self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, name="service-forwarder", daemon=True).start()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, upstream))
            threading.Thread(target=self._relay, args=(client, upstream), daemon=True).start()

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        """Both directions until each side has finished sending, then close both."""
        back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
        back.start()
        _pipe(client, upstream)
        back.join()
        with self._lock:
            for sock in (client, upstream):
                self._open.discard(sock)
                sock.close()

    def stop(self) -> None:
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept()
            self._listener.close()
            self._listener = None
        with self._lock:
            for sock in self._open:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()
        if self._added_address:
            subprocess.run(["ip", "addr", "del", f"{self.ip}/32", "dev", "lo"], capture_output=True)
            self._added_address = False
