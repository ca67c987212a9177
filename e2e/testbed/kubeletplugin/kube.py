"""API access for the plugin: a kubeconfig (test-bed, out of cluster) or the pod's service account."""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from pathlib import Path
from typing import Any

from e2e.testbed.kubeclient import KubeClient, Obj

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
_TOKEN_REREAD_SECONDS = 60.0


class ServiceAccountKubeClient(KubeClient):
    """KubeClient authenticating with a bearer token file, re-read every minute.

    (Projected service-account tokens are rotated by the kubelet.)
    """

    def __init__(self, server: str, ssl_context: ssl.SSLContext, token_file: Path, **kwargs: Any) -> None:
        super().__init__(server, ssl_context, **kwargs)
        self._token_file = token_file
        self._token_read_at = float("-inf")

    async def _refresh_token(self) -> None:
        if time.monotonic() - self._token_read_at < _TOKEN_REREAD_SECONDS:
            return
        token = (await asyncio.to_thread(self._token_file.read_text)).strip()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self._token_read_at = time.monotonic()

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Obj | list[Obj] | None = None,
        content_type: str | None = None,
        timeout_seconds: float | None = None,
    ) -> Obj:
        await self._refresh_token()
        return await super().request(
            method, path, params=params, body=body, content_type=content_type, timeout_seconds=timeout_seconds
        )


def in_cluster_available() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT_DIR / "token").is_file()


def in_cluster_client(**kwargs: Any) -> ServiceAccountKubeClient:
    """A client for the API server of the cluster this pod runs in."""
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:
        host = f"[{host}]"
    ctx = ssl.create_default_context(cafile=str(SERVICE_ACCOUNT_DIR / "ca.crt"))
    return ServiceAccountKubeClient(f"https://{host}:{port}", ctx, SERVICE_ACCOUNT_DIR / "token", **kwargs)
