"""Where webhooks may connect: the :class:`WebhookPolicy` (``actions.webhook.*``) and the guarded connect.

Whoever may write a branch may write an action file, so a webhook connects
only to addresses the server's policy allows (by default not cloud metadata
services nor link-local addresses).  The policy is checked after DNS
resolution, on every address the host resolves to and on the IPv4 address an
IPv6 one carries, and the connection goes to the checked address: a second
DNS answer cannot swap it.
"""

from __future__ import annotations

import functools
import ipaddress
from typing import TYPE_CHECKING, Any, Final

from lakemount.config import WebhookConfig
from lakemount.records import record

# The HTTP client is imported when a webhook connects: every commit reads this policy, few run a webhook (issue 41).
if TYPE_CHECKING:
    import http.client
    import socket

# A webhook holds its operation (and a server thread) for its timeout, and whoever may write a branch
# chooses the timeout: an action file may not ask for more than actions.webhook.max_timeout.
DEFAULT_MAX_TIMEOUT: Final = WebhookConfig().max_timeout

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class WebhookRefused(OSError):
    """The webhook's host resolves only to addresses the policy refuses."""


def parse_networks(text: str) -> tuple[Network, ...]:
    """Comma-separated CIDRs (blank parts ignored); raises ``ValueError`` naming the bad one."""
    out = []
    for part in (p.strip() for p in text.split(",")):
        if part:
            try:
                out.append(ipaddress.ip_network(part, strict=False))
            except ValueError:
                raise ValueError(f"not a network (CIDR such as 10.0.0.0/8): {part!r}") from None
    return tuple(out)


@record(frozen=True, slots=True)
class WebhookPolicy:
    """What webhooks may do (``actions.webhook.*``): connect never to a denied network and, when
    ``allowed`` is not empty, only to those; wait at most ``max_timeout`` seconds.  Addresses are
    checked on every address the host resolves to, and the connection goes to the checked address (a
    second DNS answer cannot swap it)."""

    allowed: tuple[Network, ...] = ()
    denied: tuple[Network, ...] = ()
    max_timeout: float = DEFAULT_MAX_TIMEOUT

    @classmethod
    def parse(cls, allowed: str, denied: str, max_timeout: float = DEFAULT_MAX_TIMEOUT) -> WebhookPolicy:
        """A policy from comma-separated CIDRs; raises ``ValueError`` naming the bad one."""
        return cls(parse_networks(allowed), parse_networks(denied), max_timeout)

    def refusal(self, address: str) -> str:
        """Why a webhook may not connect to ``address`` ('' if it may)."""
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        names = _reached(ip)
        for each in names:
            if any(each.version == n.version and each in n for n in self.denied):
                return f"{each} is in actions.webhook.denied_networks"
        if self.allowed and not any(each.version == n.version and each in n for each in names for n in self.allowed):
            return f"{names[-1]} is not in actions.webhook.allowed_networks"
        return ""


NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")  # RFC 6052's well-known prefix: the last 32 bits are IPv4


def _reached(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses a connection to ``ip`` reaches: itself, and the IPv4 address an IPv6 one carries
    (IPv4-mapped, NAT64's well-known prefix, 6to4), so ``64:ff9b::169.254.169.254`` is the metadata service."""
    if not isinstance(ip, ipaddress.IPv6Address):
        return [ip]
    inner = ip.ipv4_mapped or ip.sixtofour or (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in NAT64 else None)
    return [ip] if inner is None else [ip, inner]


def default_policy() -> WebhookPolicy:
    """The policy of the default configuration."""
    from lakemount.config import DEFAULT_WEBHOOK_DENIED

    return WebhookPolicy.parse("", DEFAULT_WEBHOOK_DENIED)


def _guarded_connect(policy: WebhookPolicy, address: tuple[str, int], timeout: Any = None,
                     source_address: Any = None, *args: Any) -> socket.socket:
    """``socket.create_connection`` that connects only to addresses ``policy`` allows."""
    import socket

    host, port = address
    try:
        literal = policy.refusal(host)  # an address literal is refused even where it cannot resolve
    except ValueError:
        literal = ""
    if literal:
        raise WebhookRefused(literal)
    refused: list[str] = []
    error: OSError | None = None
    for family, kind, proto, _, sockaddr in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        reason = policy.refusal(str(sockaddr[0]))
        if reason:
            refused.append(reason)
            continue
        sock = socket.socket(family, kind, proto)
        try:
            if timeout is not None and timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:  # type: ignore[attr-defined]
                sock.settimeout(timeout)
            if source_address:
                sock.bind(source_address)
            sock.connect(sockaddr)
            return sock
        except OSError as exc:
            sock.close()
            error = exc
    if error is not None:
        raise error
    raise WebhookRefused(f"{host}: " + "; ".join(dict.fromkeys(refused)) if refused else f"{host}: no address")


def guarded_connection(scheme: str, policy: WebhookPolicy, host: str, port: int, timeout: float) -> http.client.HTTPConnection:
    """An HTTP(S) connection whose socket connects only to an address ``policy`` allows (else ``WebhookRefused``)."""
    import http.client

    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = cls(host, port, timeout=timeout)
    conn._create_connection = functools.partial(_guarded_connect, policy)  # type: ignore[attr-defined]
    return conn
