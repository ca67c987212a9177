"""The metrics server's TLS: a server ``ssl.SSLContext`` from PEM files or from PEM bytes.

PEM bytes (a certificate made at start) go through an anonymous in-memory
file (``memfd``, Linux), since ``ssl`` loads certificates from files only: the
key never touches a filesystem and a read-only root filesystem is fine.
Elsewhere a private temporary directory is used and removed at once. Both are
called once at start, before the event loop runs.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from pathlib import Path

__all__ = ["context_from_files", "context_from_pem"]


def _context() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def context_from_files(cert_file: Path, key_file: Path) -> ssl.SSLContext:
    """A server context serving ``cert_file`` with ``key_file``; ValueError naming the file on failure."""
    for path in (cert_file, key_file):
        if not path.is_file():
            raise ValueError(f"{path} does not exist or is not a file")
    context = _context()
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as err:
        raise ValueError(f"cannot load {cert_file} with {key_file}: {err}") from None
    return context


def context_from_pem(cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
    """A server context serving ``cert_pem`` (the certificate, then its chain) with ``key_pem``."""
    if hasattr(os, "memfd_create"):
        fds = [os.memfd_create("metrics-tls.crt"), os.memfd_create("metrics-tls.key")]
        try:
            for fd, data in zip(fds, (cert_pem, key_pem), strict=True):
                os.write(fd, data)
            cert_file, key_file = (Path(f"/proc/self/fd/{fd}") for fd in fds)
            return context_from_files(cert_file, key_file)
        finally:
            for fd in fds:
                os.close(fd)
    with tempfile.TemporaryDirectory(prefix="metrics-tls-") as directory:
        cert_file, key_file = Path(directory, "tls.crt"), Path(directory, "tls.key")
        cert_file.write_bytes(cert_pem)
        key_fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(key_fd, "wb") as f:
            f.write(key_pem)
        return context_from_files(cert_file, key_file)
