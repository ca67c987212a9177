"""kubeconfig files with static credentials, read without kubernetes_asyncio's client package."""

from __future__ import annotations

import base64
import errno
import json
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from reconciler.kube.auth import load_kubeconfig
from reconciler.kube.kubeconfig import read_static
from tests.support.kubeconfigs import exec_kubeconfig, pem_pair

ROOT = Path(__file__).resolve().parents[2]


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _inline_kubeconfig(path: Path) -> None:
    ca, _ = pem_pair("inline-ca")
    cert, key = pem_pair("inline-user")
    path.write_text(
        f"""
clusters:
- name: c
  cluster: {{server: "https://127.0.0.1:6443/", certificate-authority-data: "{_b64(ca)}"}}
users:
- name: u
  user: {{client-certificate-data: "{_b64(cert)}", client-key-data: "{_b64(key)}"}}
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""
    )


@pytest.mark.asyncio
async def test_inline_certificates_load_without_a_temporary_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only root filesystem: inline CA, certificate and key never touch the disk."""
    config = tmp_path / "kubeconfig"
    _inline_kubeconfig(config)

    def no_temporary_directory() -> str:
        raise FileNotFoundError(errno.ENOENT, "No usable temporary directory found in ['/tmp']")

    monkeypatch.setattr(tempfile, "gettempdir", no_temporary_directory)
    loaded = await load_kubeconfig(str(config))
    assert loaded.server == "https://127.0.0.1:6443"
    assert isinstance(loaded.ssl, ssl.SSLContext)
    assert "inline-ca" in repr(loaded.ssl.get_ca_certs())
    assert await loaded.token_source.authorization() is None


def test_a_static_kubeconfig_leaves_the_client_package_unimported(tmp_path: Path) -> None:
    """The point of the reader: kubernetes_asyncio.client (every API class) is not loaded; a user
    with an exec plugin still goes to kubernetes_asyncio's loader."""
    static = tmp_path / "static"
    _inline_kubeconfig(static)
    plugin = tmp_path / "plugin"
    plugin.write_text(json.dumps(exec_kubeconfig("http://127.0.0.1:1")))
    probe = (
        "import asyncio, sys\n"
        "from reconciler.kube.auth import load_kubeconfig\n"
        "config = asyncio.run(load_kubeconfig(sys.argv[1]))\n"
        "token = asyncio.run(config.token_source.authorization())\n"
        "print('kubernetes_asyncio.client' in sys.modules, token)\n"
    )

    def run(path: Path) -> str:
        out = subprocess.run(
            [sys.executable, "-c", probe, str(path)], cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    assert run(static) == "False None"
    assert run(plugin) == "True Bearer t"


def test_a_kubeconfig_list_is_merged_as_kubectl_merges_it(tmp_path: Path) -> None:
    """The first file to name an entry or set current-context wins; relative paths are the
    holding file's; a missing file in the list is skipped."""
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    first, second = tmp_path / "one" / "config", tmp_path / "two" / "config"
    first.write_text(
        "clusters: [{name: c, cluster: {server: 'https://first:6443', certificate-authority: ca.crt}}]\n"
        "users: [{name: u, user: {tokenFile: token}}]\n"
        "current-context: x\n"
    )
    second.write_text(
        "clusters: [{name: c, cluster: {server: 'https://second:6443'}}]\n"
        "users: [{name: basic, user: {username: ann, password: pw}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}},\n"
        "           {name: y, context: {cluster: c, user: basic}}]\n"
        "current-context: y\n"
    )
    paths = f"{tmp_path / 'absent'}:{first}:{second}"
    chosen = read_static(paths)
    assert chosen is not None
    assert chosen.server == "https://first:6443"
    assert chosen.ca_file == str(tmp_path / "one" / "ca.crt")
    assert chosen.token_file == str(tmp_path / "one" / "token")
    basic = read_static(paths, context="y")
    assert basic is not None
    assert basic.authorization == "Basic " + _b64(b"ann:pw")
    assert read_static(paths, context="absent") is None  # the full loader names what is missing
