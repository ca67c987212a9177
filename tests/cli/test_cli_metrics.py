"""`reconciler run`'s metrics flags: HTTPS by default, plain HTTP on loopback only, certificate files."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
from pathlib import Path

import pytest

from reconciler import cli
from reconciler.webhook.certs import new_bundle

CONFIG = Path(__file__).resolve().parents[2] / "examples" / "walkthrough" / "00-configuration.yaml"


def tls_of(*flags: str) -> ssl.SSLContext | None:
    certificate = cli._metrics_tls(cli._parser().parse_args(["run", "--config", str(CONFIG), *flags]))
    return None if certificate is None else certificate.context


def test_secure_by_default_with_a_certificate_made_at_start() -> None:
    context = tls_of()
    assert isinstance(context, ssl.SSLContext)
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert tls_of("--metrics-bind-address", "0") is None  # disabled: nothing to serve


@pytest.mark.parametrize("address", ["127.0.0.1:8080", "[::1]:8080", "localhost:8080", "0"])
def test_plain_http_on_loopback_for_development(address: str) -> None:
    assert tls_of("--metrics-secure=false", "--metrics-bind-address", address) is None


@pytest.mark.parametrize("address", [":8080", "0.0.0.0:8080", "[::]:8080", "10.1.2.3:8080"])
def test_plain_http_elsewhere_is_a_usage_error_naming_the_flags(
    address: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(
        ["run", "--config", str(CONFIG), "--metrics-secure=false", "--metrics-bind-address", address]
    )
    assert code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "--metrics-secure=false" in err
    assert f"--metrics-bind-address {address}" in err
    assert "127.0.0.1:PORT" in err


def test_metrics_secure_takes_true_or_false(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["run", "--config", str(CONFIG), "--metrics-secure=maybe"])
    assert exited.value.code == 2
    assert "--metrics-secure: not true or false: 'maybe'" in capsys.readouterr().err


def test_certificate_from_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = new_bundle(["metrics.example"], dt.datetime.now(dt.UTC))
    (tmp_path / "tls.crt").write_bytes(bundle.serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(bundle.serving.key_pem)
    assert isinstance(tls_of("--metrics-cert-dir", str(tmp_path)), ssl.SSLContext)
    (tmp_path / "tls.key").write_bytes(new_bundle(["x"], dt.datetime.now(dt.UTC)).serving.key_pem)
    code = cli.main(["run", "--config", str(CONFIG), "--metrics-cert-dir", str(tmp_path)])
    assert code == cli.EXIT_USAGE
    assert f"error: --metrics-cert-dir: cannot load {tmp_path / 'tls.crt'}" in capsys.readouterr().err
    code = cli.main(["run", "--config", str(CONFIG), "--metrics-cert-dir", str(tmp_path / "absent")])
    assert code == cli.EXIT_USAGE
    assert f"{tmp_path / 'absent' / 'tls.crt'} does not exist" in capsys.readouterr().err


def test_the_certificate_made_at_start_is_ecdsa_p256_for_localhost_loopback_and_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from cryptography import x509
    from cryptography.hazmat.primitives.asymmetric import ec

    from reconciler.webhook import certs

    made: list[certs.CertBundle] = []

    def recording(hosts: list[str], now: dt.datetime) -> certs.CertBundle:
        made.append(new_bundle(hosts, now))
        return made[-1]

    monkeypatch.setattr(certs, "new_bundle", recording)
    assert tls_of() is not None
    (bundle,) = made
    cert = x509.load_pem_x509_certificate(bundle.serving.cert_pem)
    key = cert.public_key()
    assert isinstance(key, ec.EllipticCurvePublicKey)
    assert isinstance(key.curve, ec.SECP256R1)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    dns = set(names.get_values_for_type(x509.DNSName))
    ips = {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    assert (dns, ips) == ({"localhost", socket.gethostname()}, {"127.0.0.1"})
