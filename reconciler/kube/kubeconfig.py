"""kubeconfig files with static credentials, read without kubernetes_asyncio's client package.

Importing that package loads every generated API class (a third of the memory of a
controller just started), none of which the controller uses. A kubeconfig whose chosen user
holds its credentials in the file (a client certificate, a bearer token, a token file, a user
name and password) is read here instead; one whose user runs a plugin (``exec``,
``auth-provider``) or that asks for what is not read here (a proxy, impersonation) gives None,
and `auth.load_kubeconfig` hands it to kubernetes_asyncio's loader.

Files are merged as kubectl merges a ``KUBECONFIG`` list: the first file to name a cluster,
user or context wins it, and the first ``current-context`` set wins; missing files are
skipped. A relative path is relative to the file that holds it. Inline ``*-data`` is never
written to the file system: the CA is given to ``ssl`` as data, and a client certificate and
key go through an anonymous in-memory file where the platform has one.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import yaml

__all__ = ["StaticKubeconfig", "read_static", "static_ssl_context"]

# Keys a user, cluster or context may hold that this reader does not honour: the full loader does.
_USER_PLUGINS = ("exec", "auth-provider", "as", "as-groups", "as-uid", "as-user-extra")
_CLUSTER_EXTRAS = ("proxy-url", "disable-compression")


@dataclass(frozen=True, slots=True)
class StaticKubeconfig:
    server: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    cert_file: str | None = None
    cert_data: bytes | None = None
    key_file: str | None = None
    key_data: bytes | None = None
    verify: bool = True
    tls_server_name: str | None = None
    authorization: str | None = None  # the Authorization header of a token or a user name
    token_file: str | None = None


class _Merged:
    """The named entries of a KUBECONFIG list, each with the directory of the file it came from."""

    def __init__(self) -> None:
        self.current: str | None = None
        self.entries: dict[str, dict[str, tuple[Mapping[str, Any], str]]] = {
            "clusters": {},
            "users": {},
            "contexts": {},
        }

    def add(self, document: Any, folder: str) -> None:
        if not isinstance(document, Mapping):
            return
        if not self.current and document.get("current-context"):
            self.current = str(document["current-context"])
        for section, singular in (("clusters", "cluster"), ("users", "user"), ("contexts", "context")):
            for item in document.get(section) or ():
                if isinstance(item, Mapping) and isinstance(item.get(singular), Mapping):
                    self.entries[section].setdefault(str(item.get("name")), (item[singular], folder))


def read_static(paths: str, context: str | None = None) -> StaticKubeconfig | None:
    """The cluster of `paths` (one path or an os.pathsep list) when its credentials are static.

    None: the kubeconfig is one for kubernetes_asyncio's loader (a plugin, an unknown context,
    something it reports better). Raises OSError only for a file that exists and cannot be read.
    """
    merged = _Merged()
    for path in (p for p in paths.split(os.pathsep) if p):
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except FileNotFoundError:
            continue
        try:
            merged.add(yaml.safe_load(text), os.path.dirname(os.path.abspath(path)))
        except yaml.YAMLError:
            return None
    chosen = merged.entries["contexts"].get(context or merged.current or "")
    if chosen is None:
        return None
    ctx = chosen[0]
    cluster = merged.entries["clusters"].get(str(ctx.get("cluster")))
    user = merged.entries["users"].get(str(ctx.get("user")), ({}, ""))
    if cluster is None or not cluster[0].get("server"):
        return None
    if any(k in user[0] for k in _USER_PLUGINS) or any(k in cluster[0] for k in _CLUSTER_EXTRAS):
        return None
    return _compose(cluster, user)


def _compose(cluster: tuple[Mapping[str, Any], str], user: tuple[Mapping[str, Any], str]) -> StaticKubeconfig:
    spec, folder = cluster
    who, home = user

    def path(entry: Mapping[str, Any], key: str, base: str) -> str | None:
        value = entry.get(key)
        return None if not value else os.path.join(base, str(value))

    def data(entry: Mapping[str, Any], key: str) -> bytes | None:
        value = entry.get(key)
        return None if not value else base64.b64decode(str(value))

    authorization = None
    if who.get("token"):
        authorization = f"Bearer {who['token']}"
    elif who.get("username") is not None and who.get("password") is not None:
        pair = f"{who['username']}:{who['password']}".encode()
        authorization = f"Basic {base64.b64encode(pair).decode()}"
    ca_data = data(spec, "certificate-authority-data")
    return StaticKubeconfig(
        server=str(spec["server"]).rstrip("/"),
        ca_file=None if ca_data else path(spec, "certificate-authority", folder),
        ca_data=ca_data,
        cert_file=None if who.get("client-certificate-data") else path(who, "client-certificate", home),
        cert_data=data(who, "client-certificate-data"),
        key_file=None if who.get("client-key-data") else path(who, "client-key", home),
        key_data=data(who, "client-key-data"),
        verify=not bool(spec.get("insecure-skip-tls-verify")),
        tls_server_name=str(spec["tls-server-name"]) if spec.get("tls-server-name") else None,
        authorization=authorization,
        token_file=None if authorization else path(who, "tokenFile", home),
    )


def static_ssl_context(config: StaticKubeconfig) -> ssl.SSLContext:
    """The TLS context of a static kubeconfig (blocking file reads: run it off the loop)."""
    if config.verify:
        context = ssl.create_default_context(
            cafile=config.ca_file, cadata=config.ca_data.decode() if config.ca_data else None
        )
    else:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if config.cert_data is not None or config.cert_file is not None:
        with (
            _readable(config.cert_data, config.cert_file) as cert,
            _readable(config.key_data, config.key_file) as key,
        ):
            context.load_cert_chain(cert or "", key)
    return context


@contextmanager
def _readable(data: bytes | None, path: str | None) -> Iterator[str | None]:
    """A path `ssl` can read: the file itself, or inline data in an anonymous memory file (a
    private temporary file where there is none), gone when the block ends."""
    if data is None:
        yield path
        return
    memfd = getattr(os, "memfd_create", None)
    if memfd is None:
        with tempfile.NamedTemporaryFile(prefix="kubeconfig-") as handle:
            handle.write(data)
            handle.flush()
            yield handle.name
        return
    fd = memfd("kubeconfig", 0)
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)
