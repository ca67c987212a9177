"""The metrics server's TLS: a server ``ssl.SSLContext`` from PEM files or from PEM bytes.

PEM bytes (a certificate made at start) go through an anonymous in-memory
file (``memfd``, Linux), since ``ssl`` loads certificates from files only: the
key never touches a filesystem and a read-only root filesystem is fine.
Elsewhere a private temporary directory is used and removed at once. Both are
called once at start, before the event loop runs.

A certificate from files (cert-manager's Secret, mounted) is followed: every
``interval`` the files' modification times and inodes are checked and, when
they changed, a new context is loaded in a thread and handed to new
connections (the listening context's SNI callback, called on every handshake,
with or without a server name, swaps it in); a pair that does not load is
logged and the previous one kept.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import tempfile
from pathlib import Path

import structlog

__all__ = ["CertificateFiles", "ServingCertificate", "context_from_files", "context_from_pem"]

log = structlog.get_logger(__name__)


class ServingCertificate:
    """A fixed certificate (made at start): nothing to follow."""

    def __init__(self, context: ssl.SSLContext) -> None:
        self.context = context

    async def follow(self) -> None:
        return None


class CertificateFiles(ServingCertificate):
    """``tls.crt`` and ``tls.key`` of a directory, loaded again when they change."""

    def __init__(self, cert_file: Path, key_file: Path, *, interval: float = 10.0) -> None:
        self._files = (cert_file, key_file)
        self._interval = interval
        self.current = context_from_files(cert_file, key_file)
        self._stamp = self._read_stamp()
        super().__init__(self.current)
        self.context.sni_callback = self._pick

    def _pick(self, connection: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        if self.current is not context:
            connection.context = self.current

    def _read_stamp(self) -> tuple[int, ...] | None:
        try:
            stats = [os.stat(f) for f in self._files]
        except OSError:
            return None
        return tuple(n for st in stats for n in (st.st_mtime_ns, st.st_ino, st.st_size))

    async def reload_if_changed(self) -> bool:
        """Load the files again if they changed since last time; True when a new pair is served."""
        stamp = await asyncio.to_thread(self._read_stamp)
        if stamp is None or stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            self.current = await asyncio.to_thread(context_from_files, *self._files)
        except ValueError as err:
            log.warning(
                "metrics certificate changed but does not load; serving the previous one", error=str(err)
            )
            return False
        log.info("metrics certificate reloaded", cert=str(self._files[0]))
        return True

    async def follow(self) -> None:
        while True:
            await asyncio.sleep(self._interval)
            await self.reload_if_changed()


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
