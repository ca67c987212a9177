"""Certificates for the webhook server: a self-signed CA, a serving certificate it signs, and when
they must be made again. Pure: PEM bytes in and out, time given by the caller, no files, no API.

Keys are ECDSA P-256 (the API server's Go TLS stack verifies them; they are made in
milliseconds). The CA is valid for ten years and the serving certificate for one; either is made
again once it expires within ``renew_before`` (90 days), is not yet valid, or does not fit (the
serving certificate not signed by the CA, not for every host, or not matching its key).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = [
    "CA_VALIDITY",
    "RENEW_BEFORE",
    "SERVING_VALIDITY",
    "CertBundle",
    "KeyPair",
    "issue_serving",
    "new_bundle",
    "new_ca",
    "renewal_reason",
]

CA_VALIDITY = dt.timedelta(days=3650)
SERVING_VALIDITY = dt.timedelta(days=365)
RENEW_BEFORE = dt.timedelta(days=90)
BACKDATE = dt.timedelta(hours=1)  # tolerate clocks a little behind ours
CA_NAME = "dra-quota-reconciler-ca"
ORGANIZATION = "dra-quota-reconciler"


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


@dataclass(frozen=True)
class CertBundle:
    ca: KeyPair
    serving: KeyPair


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def new_ca(now: dt.datetime, validity: dt.timedelta = CA_VALIDITY) -> KeyPair:
    key = _new_key()
    name = _name(CA_NAME)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
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
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def issue_serving(
    ca: KeyPair, hosts: Sequence[str], now: dt.datetime, validity: dt.timedelta = SERVING_VALIDITY
) -> KeyPair:
    """A serving certificate for ``hosts`` (DNS names or IP addresses), signed by ``ca``."""
    if not hosts:
        raise ValueError("a serving certificate needs at least one host name")
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = _new_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(min(now + validity, ca_cert.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName([_san(h) for h in hosts]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def new_bundle(hosts: Sequence[str], now: dt.datetime) -> CertBundle:
    ca = new_ca(now)
    return CertBundle(ca, issue_serving(ca, hosts, now))


def _expiry_problem(
    cert: x509.Certificate, what: str, now: dt.datetime, renew_before: dt.timedelta
) -> str | None:
    if cert.not_valid_before_utc > now:
        return f"the {what} is not valid before {cert.not_valid_before_utc.isoformat()}"
    if cert.not_valid_after_utc - now < renew_before:
        return f"the {what} expires at {cert.not_valid_after_utc.isoformat()}"
    return None


def _public(key_pem: bytes) -> bytes:
    key = serialization.load_pem_private_key(key_pem, password=None)
    return key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _cert_public(cert: x509.Certificate) -> bytes:
    return cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def renewal_reason(
    bundle: CertBundle, hosts: Sequence[str], now: dt.datetime, renew_before: dt.timedelta = RENEW_BEFORE
) -> tuple[str, str] | None:
    """None when the bundle can go on serving; else (what to make again: "ca" or "serving", why)."""
    try:
        ca = x509.load_pem_x509_certificate(bundle.ca.cert_pem)
        if _public(bundle.ca.key_pem) != _cert_public(ca):
            return "ca", "the CA key does not match the CA certificate"
    except ValueError as err:
        return "ca", f"the CA does not parse: {err}"
    problem = _expiry_problem(ca, "CA", now, renew_before)
    if problem is not None:
        return "ca", problem
    try:
        serving = x509.load_pem_x509_certificate(bundle.serving.cert_pem)
        if _public(bundle.serving.key_pem) != _cert_public(serving):
            return "serving", "the serving key does not match the serving certificate"
    except ValueError as err:
        return "serving", f"the serving certificate does not parse: {err}"
    try:
        serving.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return "serving", "the serving certificate is not signed by the CA"
    problem = _expiry_problem(serving, "serving certificate", now, renew_before)
    if problem is not None:
        return "serving", problem
    try:
        names = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "serving", "the serving certificate names no host"
    covered = {str(n.value) for n in names}
    missing = [h for h in hosts if str(_san(h).value) not in covered]
    if missing:
        return "serving", f"the serving certificate is not for {', '.join(missing)}"
    return None
