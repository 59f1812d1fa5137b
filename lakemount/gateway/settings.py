"""The gateway's configuration, read once from the ``gateways.s3.*`` keys.

``listen_address`` (host:port, port 0 picks a free one), ``domain_name`` (one
or more comma-separated domains for virtual-host style requests:
``bucket.s3.example.com``), ``region`` (what GetBucketLocation answers),
``workers`` (processes; 0 = one per CPU), ``flat`` (every bucket is a
repository whose keys live on its default branch), ``aliases`` (a mapping
``bucket: repo/ref`` giving a bucket name to one ref of a repository) and
``tls.cert_file`` / ``tls.key_file`` (PEM files: serve HTTPS).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lakemount.config import Config
from lakemount.errors import InvalidArgument


@dataclass(frozen=True, slots=True)
class Alias:
    """A bucket name standing for one ref of a repository."""

    repo: str
    ref: str


@dataclass(frozen=True, slots=True)
class GatewaySettings:
    """The gateway section of the configuration, validated (see ``from_config``)."""

    host: str = "127.0.0.1"
    port: int = 8000
    domain_names: tuple[str, ...] = ()
    region: str = "us-east-1"
    workers: int = 1
    flat: bool = False
    aliases: Mapping[str, Alias] = field(default_factory=dict)
    threads: int = 32
    tls_cert_file: str = ""
    tls_key_file: str = ""

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert_file else "http"


def parse_listen_address(text: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too); raises ``InvalidArgument``."""
    host, sep, port = text.strip().rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise InvalidArgument(f"gateways.s3.listen_address must look like host:port, got {text!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def parse_aliases(raw: Any) -> dict[str, Alias]:
    """``{bucket: "repo/ref"}`` (or a ``bucket=repo/ref,...`` string); raises ``InvalidArgument``."""
    if not raw:
        return {}
    if isinstance(raw, str):
        pairs = [p.split("=", 1) for p in raw.split(",") if p.strip()]
        if any(len(p) != 2 for p in pairs):
            raise InvalidArgument("gateways.s3.aliases must look like bucket=repo/ref,...")
        raw = {k.strip(): v.strip() for k, v in pairs}
    if not isinstance(raw, Mapping):
        raise InvalidArgument("gateways.s3.aliases must map bucket names to repo/ref")
    out: dict[str, Alias] = {}
    for bucket, target in raw.items():
        repo, sep, ref = str(target).partition("/")
        if not sep or not repo or not ref:
            raise InvalidArgument(f"gateways.s3.aliases.{bucket} must look like repo/ref, got {target!r}")
        out[str(bucket)] = Alias(repo, ref)
    return out


def from_config(config: Config, **overrides: Any) -> GatewaySettings:
    """Settings from ``config`` with command-line ``overrides`` (None values ignored).

    Raises ``InvalidArgument`` for a bad address or a TLS certificate without its key.
    """
    s3 = config.gateways.s3
    listen = overrides.get("listen_address") or s3.listen_address
    host, port = parse_listen_address(str(listen))
    domains = overrides.get("domain_name") or s3.domain_name
    workers = overrides.get("workers")
    if workers is None:
        workers = s3.workers
    if workers <= 0:
        workers = max(1, min(os.cpu_count() or 1, 8))
    flat = overrides.get("flat")
    if flat is None:
        flat = s3.flat
    settings = GatewaySettings(
        host=host,
        port=port,
        domain_names=tuple(d.strip().lower().strip(".") for d in str(domains).split(",") if d.strip()),
        region=s3.region or "us-east-1",
        workers=int(workers),
        flat=bool(flat),
        aliases=parse_aliases(s3.aliases),
        threads=s3.threads or 32,
        tls_cert_file=str(overrides.get("tls_cert_file") or s3.tls.cert_file),
        tls_key_file=str(overrides.get("tls_key_file") or s3.tls.key_file),
    )
    if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
        raise InvalidArgument("gateways.s3.tls needs both cert_file and key_file")
    return settings
