"""Where the controller lives and serves: ``namespace``, ``internalCertManagement`` and
``webhook``, with Kueue's defaults."""

from __future__ import annotations

from dataclasses import dataclass

from .fields import DNS_LABEL, DNS_SUBDOMAIN, ConfigError, check_unknown, expect

__all__ = [
    "DEFAULT_WEBHOOK_CERT_DIR",
    "DEFAULT_WEBHOOK_PORT",
    "DEFAULT_WEBHOOK_SECRET_NAME",
    "DEFAULT_WEBHOOK_SERVICE_NAME",
    "InternalCertManagement",
    "WebhookServer",
    "parse_internal_cert_management",
    "parse_namespace",
    "parse_webhook",
]

# Kueue's defaults (apis/config/v1beta2/defaults.go).
DEFAULT_WEBHOOK_SERVICE_NAME = "kueue-webhook-service"
DEFAULT_WEBHOOK_SECRET_NAME = "kueue-webhook-server-cert"
DEFAULT_WEBHOOK_PORT = 9443
DEFAULT_WEBHOOK_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"


@dataclass(frozen=True)
class InternalCertManagement:
    """Kueue's internalCertManagement: a self-signed CA and serving certificate kept in a Secret.

    With ``enable`` false the serving certificate is provided from outside (cert-manager), mounted
    in the webhook's certificate directory as tls.crt and tls.key."""

    enable: bool = True
    webhook_service_name: str = DEFAULT_WEBHOOK_SERVICE_NAME
    webhook_secret_name: str = DEFAULT_WEBHOOK_SECRET_NAME


@dataclass(frozen=True)
class WebhookServer:
    """Kueue's ``webhook`` section: where the admission webhooks listen and find their certificate."""

    port: int = DEFAULT_WEBHOOK_PORT
    host: str = ""
    cert_dir: str = DEFAULT_WEBHOOK_CERT_DIR


def parse_namespace(raw: object) -> str | None:
    if raw is None:
        return None
    name: str = expect(raw, str, "namespace", "a namespace name")
    if not DNS_LABEL.match(name) or len(name) > 63:
        raise ConfigError(
            f"namespace: Invalid value: {name!r}: must be a namespace name (lower-case RFC 1123 label, "
            "e.g. dra-quota-system)"
        )
    return name


def parse_internal_cert_management(raw: object) -> InternalCertManagement:
    path = "internalCertManagement"
    obj = expect(raw or {}, dict, path, "an object")
    check_unknown(obj, {"enable", "webhookServiceName", "webhookSecretName"}, path)
    enable = expect(obj.get("enable", True), bool, f"{path}.enable", "true or false")
    service = obj.get("webhookServiceName", DEFAULT_WEBHOOK_SERVICE_NAME)
    if not isinstance(service, str) or not DNS_LABEL.match(service) or len(service) > 63:
        raise ConfigError(
            f"{path}.webhookServiceName: Invalid value: {service!r}: must be a Service name "
            "(lower-case RFC 1123 label of at most 63 characters)"
        )
    secret = obj.get("webhookSecretName", DEFAULT_WEBHOOK_SECRET_NAME)
    if not isinstance(secret, str) or not DNS_SUBDOMAIN.match(secret) or len(secret) > 253:
        raise ConfigError(
            f"{path}.webhookSecretName: Invalid value: {secret!r}: must be a Secret name "
            "(lower-case RFC 1123 subdomain)"
        )
    return InternalCertManagement(enable, service, secret)


def parse_webhook(raw: object) -> WebhookServer:
    path = "webhook"
    obj = expect(raw or {}, dict, path, "an object")
    check_unknown(obj, {"port", "host", "certDir"}, path)
    port = expect(obj.get("port", DEFAULT_WEBHOOK_PORT), int, f"{path}.port", "a port number")
    if not 0 < port < 65536:
        raise ConfigError(f"{path}.port: Invalid value: {port}: must be between 1 and 65535, e.g. 9443")
    host = expect(obj.get("host", ""), str, f"{path}.host", "a host name or address")
    cert_dir = expect(obj.get("certDir", DEFAULT_WEBHOOK_CERT_DIR), str, f"{path}.certDir", "a directory")
    if not cert_dir:
        raise ConfigError(f"{path}.certDir: Required value: name the directory holding tls.crt and tls.key")
    return WebhookServer(port=port, host=host, cert_dir=cert_dir)
