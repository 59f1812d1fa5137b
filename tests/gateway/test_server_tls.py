"""The gateway over HTTPS, where boto3 sends aws-chunked bodies with trailing checksums."""

from __future__ import annotations

import base64
import datetime as dt
import http.client
import ipaddress
import ssl
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .server_fixture import Gateway, signed_headers, start_gateway


def self_signed(tmp: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp / "cert.pem", tmp / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, Path]]:
    tmp = tmp_path_factory.mktemp("gw-tls")
    cert, key = self_signed(tmp)
    g = start_gateway(tmp, workers=1, extra_args=("--tls-cert", str(cert), "--tls-key", str(key)), ca_file=str(cert))
    yield g, cert
    g.stop()


def test_boto3_over_https_uses_trailing_checksums(tls: tuple[Gateway, Path]) -> None:
    gw, cert = tls
    assert gw.url.startswith("https://")
    s3: Any = gw.client(verify=str(cert))
    bucket = gw.bucket(s3)
    seen: list[str] = []
    s3.meta.events.register("before-send.s3.PutObject", lambda request, **_: seen.append(request.headers.get("x-amz-content-sha256", b"")))
    s3.put_object(Bucket=bucket, Key="main/t.txt", Body=b"over tls" * 1000)
    assert seen and b"STREAMING-UNSIGNED-PAYLOAD-TRAILER" in (seen[0] if isinstance(seen[0], bytes) else seen[0].encode())
    got = s3.get_object(Bucket=bucket, Key="main/t.txt", ChecksumMode="ENABLED")
    assert got["Body"].read() == b"over tls" * 1000
    from boto3.s3.transfer import TransferConfig

    data = bytes(range(256)) * (6 * 4096)
    src = gw.home / "src.bin"
    src.write_bytes(data)
    s3.upload_file(str(src), bucket, "main/mp.bin", Config=TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
    assert s3.get_object(Bucket=bucket, Key="main/mp.bin")["Body"].read() == data


def test_wrong_trailing_checksum_is_refused(tls: tuple[Gateway, Path]) -> None:
    gw, cert = tls
    bucket = gw.bucket(gw.client(verify=str(cert)))
    good = base64.b64encode(zlib.crc32(b"hello").to_bytes(4, "big")).decode()
    bad = base64.b64encode(zlib.crc32(b"jello").to_bytes(4, "big")).decode()
    ctx = ssl.create_default_context(cafile=str(cert))
    results = {}
    for name, crc in (("good", good), ("bad", bad)):
        path = f"/{bucket}/main/{name}"
        body = f"5\r\nhello\r\n0\r\nx-amz-checksum-crc32:{crc}\r\n\r\n".encode()
        extra = {"content-encoding": "aws-chunked", "x-amz-decoded-content-length": "5", "x-amz-trailer": "x-amz-checksum-crc32"}
        headers = signed_headers("PUT", gw.url + path, extra, "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
        conn = http.client.HTTPSConnection("127.0.0.1", gw.port, context=ctx, timeout=30)
        conn.request("PUT", path, body=body, headers=headers)
        r = conn.getresponse()
        results[name] = (r.status, r.read())
        conn.close()
    assert results["good"][0] == 200
    assert results["bad"][0] == 400 and b"BadDigest" in results["bad"][1]
