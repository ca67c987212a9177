"""The webhooks of one replica: the HTTPS server and, with internalCertManagement, the certificate
manager, wired from the Configuration and the command line, run together until cancelled."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from reconciler.admission.queue_rules import JobPolicy
from reconciler.config import Configuration
from reconciler.integrations import enabled
from reconciler.kube import KubeClient

from .certmanager import CertManager, CertSettings
from .lookups import ApiLookups
from .server import WebhookServer, make_app

__all__ = ["WebhookOptions", "Webhooks", "build_webhooks"]


@dataclass(frozen=True)
class WebhookOptions:
    host: str | None  # None: every interface
    port: int
    cert_dir: Path
    namespace: str  # the controller's namespace: where the certificate Secret lives
    extra_hosts: tuple[str, ...] = ()  # more names or addresses the serving certificate is for
    cert_check_interval: float = 60.0
    reload_interval: float = 10.0


@dataclass
class Webhooks:
    server: WebhookServer
    certs: CertManager | None

    def not_serving_reason(self) -> str | None:
        return self.server.not_serving_reason()

    async def run(self) -> None:
        """Serve (and manage certificates) until cancelled; a server that cannot listen raises."""
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(self.server.run(), name="webhook-server")
                if self.certs is not None:
                    group.create_task(self.certs.run(), name="webhook-certificates")
        except ExceptionGroup as failed:
            raise failed.exceptions[0] from None


def build_webhooks(config: Configuration, options: WebhookOptions, client: KubeClient) -> Webhooks:
    children = [i for i in enabled(config.frameworks) if not i.top_level]
    policy = JobPolicy(
        frameworks=frozenset(config.frameworks),
        manage_without_queue_name=config.manage_jobs_without_queue_name,
        own_namespace=options.namespace,
        namespace_selector=config.managed_jobs_namespace_selector,
        job_kinds=frozenset((i.api_version, i.kind) for i in children),
    )
    app = make_app(policy, ApiLookups(client, tuple(i.resource for i in children)))
    server = WebhookServer(app, options.host, options.port, options.cert_dir, options.reload_interval)
    certs = None
    internal = config.internal_cert_management
    if internal.enable:
        settings = CertSettings(
            namespace=options.namespace,
            secret_name=internal.webhook_secret_name,
            service_name=internal.webhook_service_name,
            extra_hosts=options.extra_hosts,
        )
        certs = CertManager(client, settings, options.cert_dir, check_interval=options.cert_check_interval)
    return Webhooks(server, certs)
