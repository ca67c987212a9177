"""Certificates, service-account keys and the admin kubeconfig for the test-bed.

Everything uses ECDSA P-256 keys: quick to generate and accepted by every
component (the service-account tokens are then signed with ES256).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = dt.timedelta(days=365)
SERVING_DNS_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
SERVING_IPS = ("127.0.0.1", "10.0.0.1")


@dataclass(frozen=True)
class Pki:
    """Paths of the generated files (all inside one directory)."""

    directory: Path

    @property
    def ca_cert(self) -> Path:
        return self.directory / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "serving.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "serving.key"

    @property
    def admin_cert(self) -> Path:
        return self.directory / "admin.crt"

    @property
    def admin_key(self) -> Path:
        return self.directory / "admin.key"

    @property
    def front_proxy_ca_cert(self) -> Path:
        return self.directory / "front-proxy-ca.crt"

    @property
    def front_proxy_client_cert(self) -> Path:
        return self.directory / "front-proxy-client.crt"

    @property
    def front_proxy_client_key(self) -> Path:
        return self.directory / "front-proxy-client.key"

    @property
    def sa_private_key(self) -> Path:
        return self.directory / "sa.key"

    @property
    def sa_public_key(self) -> Path:
        return self.directory / "sa.pub"


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization is not None:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(parts)


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + _VALIDITY)
    )


FRONT_PROXY_CLIENT = "front-proxy-client"


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = _new_key()
    name = _name(common_name)
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        _builder(name, name, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _front_proxy(pki: Pki) -> None:
    """The aggregation layer's own CA and the API server's front-proxy client certificate, as a
    real cluster has them (kube-apiserver --requestheader-client-ca-file, --proxy-client-*)."""
    ca_key, ca_cert = _ca("front-proxy-ca")
    key = _new_key()
    cert = (
        _builder(_name(FRONT_PROXY_CLIENT), ca_cert.subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_cert(pki.front_proxy_ca_cert, ca_cert)
    _write_cert(pki.front_proxy_client_cert, cert)
    _write_key(pki.front_proxy_client_key, key)


def generate_pki(directory: Path) -> Pki:
    """Create a CA, a serving cert, an admin client cert and SA keys in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)

    ca_key = _new_key()
    ca_name = _name("dra-quota-testbed-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    _write_key(pki.ca_key, ca_key)
    _write_cert(pki.ca_cert, ca_cert)

    def leaf(
        subject: x509.Name, usage: x509.ObjectIdentifier, sans: list[x509.GeneralName] | None
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = _new_key()
        builder = (
            _builder(subject, ca_name, key.public_key())
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False)
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in SERVING_DNS_NAMES]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in SERVING_IPS]
    serving_key, serving_cert = leaf(_name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans)
    _write_key(pki.serving_key, serving_key)
    _write_cert(pki.serving_cert, serving_cert)

    admin_key, admin_cert = leaf(
        _name("testbed-admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH, None
    )
    _write_key(pki.admin_key, admin_key)
    _write_cert(pki.admin_cert, admin_cert)

    sa_key = _new_key()
    _write_key(pki.sa_private_key, sa_key)
    pki.sa_public_key.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    _front_proxy(pki)
    return pki


def write_kubeconfig(path: Path, server: str, pki: Pki) -> None:
    """An admin kubeconfig with absolute file references (usable by kubectl too)."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "testbed",
                "cluster": {"server": server, "certificate-authority": str(pki.ca_cert.resolve())},
            }
        ],
        "users": [
            {
                "name": "testbed-admin",
                "user": {
                    "client-certificate": str(pki.admin_cert.resolve()),
                    "client-key": str(pki.admin_key.resolve()),
                },
            }
        ],
        "contexts": [{"name": "testbed", "context": {"cluster": "testbed", "user": "testbed-admin"}}],
        "current-context": "testbed",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
