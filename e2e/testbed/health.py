"""Blocking health probes for the control-plane components (used outside event loops)."""

from __future__ import annotations

import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass

from e2e.testbed.errors import TestbedError
from e2e.testbed.pki import Pki


def client_ssl_context(pki: Pki) -> ssl.SSLContext:
    """Trusts the test-bed CA and presents the admin client certificate."""
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    return ctx


@dataclass(frozen=True)
class Probe:
    url: str
    ssl_context: ssl.SSLContext | None = None

    def check(self, timeout: float = 2.0) -> tuple[bool, str]:
        """(healthy, short detail). Never raises for network errors.

        ``unix:<path>``: healthy when something accepts connections on that socket.
        """
        if self.url.startswith("unix:"):
            return _check_unix_socket(self.url.removeprefix("unix:"), timeout)
        try:
            with urllib.request.urlopen(self.url, timeout=timeout, context=self.ssl_context) as resp:
                body = resp.read(2048).decode(errors="replace").strip()
                return resp.status == 200, f"HTTP {resp.status} {body[:200]}"
        except urllib.error.HTTPError as err:
            body = err.read(2048).decode(errors="replace").strip()
            return False, f"HTTP {err.code} {body[-500:]}"
        except (urllib.error.URLError, OSError, TimeoutError) as err:
            return False, f"{type(err).__name__}: {err}"


def _check_unix_socket(path: str, timeout: float) -> tuple[bool, str]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(path)
        except (OSError, TimeoutError) as err:
            return False, f"{path}: {type(err).__name__}: {err.strerror or err}"
    return True, f"listening on {path}"


def wait_until_healthy(
    name: str,
    probe: Probe,
    timeout: float,
    still_running: Callable[[], bool],
    log_tail: Callable[[], str],
) -> None:
    """Poll ``probe`` until it answers 200; fail fast if the process exits.

    The error message quotes the tail of the component's log.
    """
    deadline = time.monotonic() + timeout
    detail = "no answer yet"
    while True:
        if not still_running():
            raise TestbedError(
                f"{name} exited during start-up (last probe: {detail}); log tail:\n{log_tail()}"
            )
        ok, detail = probe.check()
        if ok:
            return
        if time.monotonic() > deadline:
            raise TestbedError(
                f"{name} not healthy after {timeout:.0f}s at {probe.url} (last probe: {detail});"
                f" log tail:\n{log_tail()}"
            )
        time.sleep(0.2)
