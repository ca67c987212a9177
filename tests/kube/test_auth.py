"""Configuration: kubeconfig through kubernetes_asyncio's loader, in-cluster service account."""

from __future__ import annotations

import base64
import errno
import json
import tempfile
from pathlib import Path

import pytest

from reconciler.api.resources import WORKLOADS
from reconciler.kube import ConfigError, KubeClient, Unauthorized
from reconciler.kube.auth import FileTokenSource, load_in_cluster
from tests.support.fake_apiserver import FakeApiServer, json_reply, status_reply
from tests.support.kubeconfigs import exec_kubeconfig, pem_pair


def _write_ca(path: Path) -> None:
    path.write_bytes(pem_pair("test-ca")[0])


@pytest.mark.asyncio
async def test_from_kubeconfig_token(fake: FakeApiServer, tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        f"""
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {{server: "{fake.url}"}}
users:
- name: u
  user: {{token: s3cret}}
contexts:
- name: other
  context: {{cluster: c, user: nobody}}
- name: ctx
  context: {{cluster: c, user: u}}
current-context: other
"""
    )
    fake.script(("LIST", "/api"), json_reply(200, {"kind": "APIVersions"}))
    kube = await KubeClient.from_kubeconfig(str(config), context="ctx")
    try:
        await kube.get("/api")
    finally:
        await kube.close()
    assert fake.requests[0].headers["Authorization"] == "Bearer s3cret"


@pytest.mark.asyncio
async def test_from_kubeconfig_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        await KubeClient.from_kubeconfig(str(tmp_path / "absent"))


@pytest.mark.asyncio
async def test_in_cluster(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token\n")
    _write_ca(tmp_path / "ca.crt")
    env = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    config = await load_in_cluster(environ=env, account_dir=str(tmp_path))
    assert config.server == "https://[fd00::1]:443"
    assert await config.token_source.authorization() == "Bearer sa-token"


@pytest.mark.asyncio
async def test_in_cluster_needs_environment(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not in a cluster"):
        await load_in_cluster(environ={}, account_dir=str(tmp_path))
    with pytest.raises(ConfigError, match="token"):
        await load_in_cluster(
            environ={"KUBERNETES_SERVICE_HOST": "h", "KUBERNETES_SERVICE_PORT": "1"},
            account_dir=str(tmp_path),
        )


@pytest.mark.asyncio
async def test_service_account_token_is_reread(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one")
    source = FileTokenSource(str(token), refresh=0.0)
    assert await source.authorization() == "Bearer one"
    token.write_text("two")
    assert await source.authorization() == "Bearer two"
    token.unlink()  # a rotation in progress: keep the previous token
    assert await source.authorization() == "Bearer two"


class _Rotating:
    def __init__(self) -> None:
        self.tokens = ["Bearer old", "Bearer new"]
        self.invalidated = 0

    async def authorization(self) -> str | None:
        return self.tokens[0]

    def invalidate(self) -> None:
        self.invalidated += 1
        if len(self.tokens) > 1:
            self.tokens.pop(0)


@pytest.mark.asyncio
async def test_401_reloads_credentials_and_retries_once(fake: FakeApiServer) -> None:
    path = WORKLOADS.list_path("ns")
    fake.script(("POST", path), status_reply(401, "Unauthorized", "expired"), json_reply(201, {}))
    source = _Rotating()
    kube = KubeClient(fake.url, token_source=source)
    try:
        await kube.create(WORKLOADS, "ns", b"{}")
        assert [r.headers["Authorization"] for r in fake.requests] == ["Bearer old", "Bearer new"]
        fake.fallback(("POST", path), status_reply(401, "Unauthorized", "still no"))
        with pytest.raises(Unauthorized):
            await kube.create(WORKLOADS, "ns", b"{}")
        assert len(fake.requests) == 4  # one retry, no more
    finally:
        await kube.close()


@pytest.mark.asyncio
async def test_kubeconfig_env_list_is_merged(
    fake: FakeApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    clusters = f'clusters: [{{name: c, cluster: {{server: "{fake.url}"}}}}]\n'
    first.write_text(clusters + "users: [{name: u, user: {token: merged}}]\n")
    second.write_text("contexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n")
    monkeypatch.setenv("KUBECONFIG", f"{first}:{second}")
    fake.script(("LIST", "/api"), json_reply(200, {}))
    kube = await KubeClient.from_kubeconfig()
    try:
        await kube.get("/api")
    finally:
        await kube.close()
    assert fake.requests[0].headers["Authorization"] == "Bearer merged"


@pytest.mark.asyncio
async def test_inline_certificate_data_without_a_temporary_directory_names_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only root filesystem and a user with an exec plugin: kubernetes_asyncio's loader
    cannot write the inline CA to a temporary file. (Static credentials need none: see
    test_kubeconfig.)"""
    _write_ca(tmp_path / "ca.crt")
    ca_data = base64.b64encode((tmp_path / "ca.crt").read_bytes()).decode()
    config = tmp_path / "kubeconfig"
    server = "https://127.0.0.1:6443"
    config.write_text(json.dumps(exec_kubeconfig(server, {"certificate-authority-data": ca_data})))

    def no_temporary_directory() -> str:
        raise FileNotFoundError(errno.ENOENT, "No usable temporary directory found in ['/tmp']")

    monkeypatch.setattr(tempfile, "gettempdir", no_temporary_directory)
    with pytest.raises(ConfigError, match=r"writable temporary directory .*--tmpfs /tmp"):
        await KubeClient.from_kubeconfig(str(config))
