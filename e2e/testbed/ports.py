"""Free loopback ports and checks that a port is (not) listening."""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"


# Listening ports are drawn below the kernel's ephemeral range: a port the kernel handed out
# for a moment (bind to 0) can be taken again by any outgoing connection before the server
# that was meant to listen on it binds, which made tests fail with "address in use".
_LISTEN_RANGE_LOW = 20000
_EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")


def _listen_range() -> range:
    try:
        ephemeral_low = int(_EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    return range(_LISTEN_RANGE_LOW, max(ephemeral_low, _LISTEN_RANGE_LOW + 1000))


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports on 127.0.0.1 that nothing listens on now, chosen at random
    below the ephemeral range (see above).

    All sockets are held open until every port is chosen so none is handed out twice.
    """
    candidates = _listen_range()
    sockets: list[socket.socket] = []
    try:
        while len(sockets) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((LOOPBACK, random.choice(candidates)))
            except OSError:
                s.close()
                continue
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def is_listening(port: int, host: str = LOOPBACK, timeout: float = 0.5) -> bool:
    """True if something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False
