"""The hook types actions can use: ``webhook`` (lakeFS's) and ``lakemount_check`` (data checks, no code).

``webhook`` POSTs the event JSON to ``url`` (``query_params`` and ``headers``
added; ``timeout`` a Go-style duration such as ``30s`` or ``1m30s``, default
1m, bounds the whole exchange; one over ``actions.webhook.max_timeout`` fails
the hook).  Any 2xx answer passes; another status (a redirect is not followed), a
timeout, a refused connection or a response that is not HTTP fails the hook,
with the status and the start of the body (control characters removed) as its
message.  Whoever may write a branch may write an action file, so a webhook
connects only to addresses the server's :class:`WebhookPolicy` allows
(``actions.webhook.*``; by default not cloud metadata services nor link-local
addresses), checked after DNS resolution; a refused address fails the hook.

``lakemount_check`` looks at the objects the operation brings in (a commit's
staged changes, what a merge brings from its source since the merge base);
paths under ``_lakefs_actions/`` are exempt.  Properties, each optional:

==================  =========================================================
allowed_paths       globs; every added or changed path must match one
denied_paths        globs; no added or changed path may match any
formats             e.g. ``[parquet, csv, json]``: every added or changed
                    object must have one of their extensions (``.parquet``,
                    ``.csv``, ``.json``, ``.jsonl``/``.ndjson``) and parse as it
max_size, min_size  bytes per object (``10MB``, ``1GiB`` and plain numbers)
required_metadata   commit metadata keys the commit or merge must carry
parquet_schema      ``compatible``: a new Parquet file keeps every column (name
                    and type) of an existing Parquet file in its directory on
                    the destination; new columns may be added
max_reported        how many offending paths the message lists (default 10)
==================  =========================================================
"""

from __future__ import annotations

import csv
import fnmatch
import functools
import http.client
import io
import ipaddress
import json
import posixpath
import re
import socket
import threading
import urllib.parse
from dataclasses import dataclass
from typing import Any, Final

from lakemount.catalog.actions import ACTIONS_PREFIX, Event, Hook, HookContext, HookFailure, HookRunner
from lakemount.config import WebhookConfig

DEFAULT_TIMEOUT: Final = 60.0
# A webhook holds its operation (and a server thread) for its timeout, and whoever may write a branch
# chooses the timeout: an action file may not ask for more than actions.webhook.max_timeout.
DEFAULT_MAX_TIMEOUT: Final = WebhookConfig().max_timeout
MAX_BODY: Final = 64 * 1024
MAX_MESSAGE: Final = 500
SAMPLE: Final = 1 << 20
MAX_JSON: Final = 64 << 20

EXTENSIONS: Final = {
    "parquet": (".parquet",),
    "csv": (".csv",),
    "json": (".json",),
    "jsonl": (".jsonl", ".ndjson"),
}


def parse_duration(value: object) -> float:
    """Seconds in a Go-style duration (``500ms``, ``30s``, ``1m30s``, ``1h``) or a number; raises ``HookFailure``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        text = str(value).strip()
        parts = re.findall(r"(\d+(?:\.\d+)?)(ms|h|m|s)", text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise HookFailure(f"bad timeout {value!r}: use a duration such as 30s or 1m30s")
        unit = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
        seconds = sum(float(n) * unit[u] for n, u in parts)
    if seconds <= 0:
        raise HookFailure(f"bad timeout {value!r}: must be positive")
    return seconds


def parse_size(value: object) -> int:
    """Bytes in ``1048576``, ``10MB``, ``1.5GiB``; raises ``HookFailure``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?i?B?)\s*", str(value), re.IGNORECASE)
    if not m:
        raise HookFailure(f"bad size {value!r}: use bytes or a number with KB, MB, GB, KiB, MiB, GiB")
    unit = m.group(2).upper().rstrip("B")
    base = 1024 if unit.endswith("I") else 1000
    power = "KMGT".find(unit[:1]) + 1 if unit else 0
    return int(float(m.group(1)) * base**power)


def printable(data: bytes, limit: int = MAX_MESSAGE) -> str:
    """The start of a response body as one line of text: undecodable bytes and control characters removed."""
    text = data[: limit * 4].decode("utf-8", "replace")
    text = "".join(c if c.isprintable() else " " for c in text)
    text = " ".join(text.split())
    return text[:limit] + ("..." if len(text) > limit else "")


# ---------------------------------------------------------------------------- webhook
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


@dataclass(frozen=True, slots=True)
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


def _connection(scheme: str, policy: WebhookPolicy, host: str, port: int, timeout: float) -> http.client.HTTPConnection:
    """An HTTP(S) connection whose socket comes from :func:`_guarded_connect` under ``policy``."""
    cls = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
    conn = cls(host, port, timeout=timeout)
    conn._create_connection = functools.partial(_guarded_connect, policy)  # type: ignore[attr-defined]
    return conn


def run_webhook(hook: Hook, event: Event, payload: dict[str, Any], ctx: HookContext) -> str:
    """POST the event to the hook's ``url``; returns the output, raises ``HookFailure``.

    The connection goes directly to the host (no proxy) and only to an address the
    context's :class:`WebhookPolicy` allows; redirects are not followed (a 3xx fails
    the hook), so an answer cannot send the server on to another address.
    """
    props = hook.properties
    url = props.get("url")
    parts = urllib.parse.urlsplit(url) if isinstance(url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise HookFailure("webhook needs an http(s) 'url' property")
    policy = ctx.webhooks if ctx.webhooks is not None else default_policy()
    timeout = min(DEFAULT_TIMEOUT, policy.max_timeout)
    if "timeout" in props:
        timeout = parse_duration(props["timeout"])
        if timeout > policy.max_timeout:
            raise HookFailure(f"webhook timeout {printable(str(props['timeout']).encode(), 40)} is more than "
                              f"actions.webhook.max_timeout ({policy.max_timeout:g}s)")
    query = parts.query
    params = props.get("query_params") or {}
    if params:
        if not isinstance(params, dict):
            raise HookFailure("webhook 'query_params' must be a mapping")
        pairs = [(k, v) for k, vs in params.items() for v in (vs if isinstance(vs, list) else [vs])]
        query += ("&" if query else "") + urllib.parse.urlencode(pairs)
    headers = {"Content-Type": "application/json", "User-Agent": "lakemount-actions"}
    extra = props.get("headers") or {}
    if not isinstance(extra, dict):
        raise HookFailure("webhook 'headers' must be a mapping")
    headers.update({str(k): str(v) for k, v in extra.items()})
    try:
        port = parts.port
    except ValueError:
        raise HookFailure("webhook 'url' has a bad port") from None
    if port is None:
        port = 443 if parts.scheme == "https" else 80
    conn = _connection(parts.scheme, policy, parts.hostname, port, timeout)
    target = (parts.path or "/") + ("?" + query if query else "")
    # ``timeout`` bounds each socket operation; this bounds the whole exchange, so an answer
    # trickled a byte at a time cannot hold the operation (and a server thread) for ever.
    expired = threading.Event()
    connected: list[socket.socket] = []  # the connection's socket (it leaves ``conn`` when the answer closes it)

    def expire() -> None:
        expired.set()
        for sock in connected or ([conn.sock] if conn.sock is not None else []):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    timed_out = f"webhook timed out after {timeout:g}s"
    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    try:
        try:
            conn.connect()
        except WebhookRefused as exc:
            raise HookFailure(f"webhook refused: {exc}") from None
        except TimeoutError:
            raise HookFailure(timed_out) from None
        except OSError as exc:
            raise HookFailure(f"webhook unreachable: {exc}") from None
        if conn.sock is not None:
            connected.append(conn.sock)
        if expired.is_set():  # the deadline passed while connecting
            raise HookFailure(timed_out)
        try:
            conn.request("POST", target, body=json.dumps(payload).encode(), headers=headers)
            resp = conn.getresponse()
            body = resp.read(MAX_BODY)
        except TimeoutError:
            raise HookFailure(timed_out) from None
        except (http.client.HTTPException, OSError) as exc:
            if expired.is_set():
                raise HookFailure(timed_out) from None
            raise HookFailure(f"webhook gave no valid HTTP response: {type(exc).__name__}: {printable(str(exc).encode())}") from None
        if expired.is_set():
            raise HookFailure(timed_out)
    finally:
        timer.cancel()
        conn.close()
    if 200 <= resp.status < 300:
        return f"{resp.status} {printable(body)}".strip()
    if 300 <= resp.status < 400:
        where = printable((resp.getheader("Location") or "").encode(), 200)
        raise HookFailure(f"webhook answered {resp.status} (redirect to {where or '?'}): redirects are not followed")
    raise HookFailure(f"webhook answered {resp.status}: {printable(body) or resp.reason}")


# ---------------------------------------------------------------------------- data checks
def _globs(props: Any, key: str) -> list[str]:
    value = props.get(key)
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise HookFailure(f"'{key}' must be a list of globs")
    return value


def _offenders(kind: str, paths: list[str], limit: int) -> str:
    shown = ", ".join(paths[:limit]) + (f" (+{len(paths) - limit} more)" if len(paths) > limit else "")
    return f"{len(paths)} path(s) {kind}: {shown}"


def run_check(hook: Hook, event: Event, payload: dict[str, Any], ctx: HookContext) -> str:
    """Check the changes ``event`` brings in against the hook's properties; raises ``HookFailure``."""
    props = hook.properties
    known = {"allowed_paths", "denied_paths", "formats", "max_size", "min_size", "required_metadata", "parquet_schema", "max_reported"}
    unknown = sorted(set(props) - known)
    if unknown:
        raise HookFailure(f"unknown lakemount_check properties: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    limit = int(props.get("max_reported", 10))
    problems: list[str] = []
    required = props.get("required_metadata") or []
    if required:
        if not isinstance(required, list):
            raise HookFailure("'required_metadata' must be a list of keys")
        missing = [k for k in required if k not in event.commit_metadata]
        if missing:
            problems.append(f"missing commit metadata: {', '.join(map(str, missing))}")
    allowed, denied = _globs(props, "allowed_paths"), _globs(props, "denied_paths")
    formats = props.get("formats") or []
    if isinstance(formats, str):
        formats = [formats]
    bad_formats = [f for f in formats if f not in EXTENSIONS]
    if bad_formats:
        raise HookFailure(f"unknown formats {bad_formats}: use {', '.join(EXTENSIONS)}")
    max_size = parse_size(props["max_size"]) if "max_size" in props else None
    min_size = parse_size(props["min_size"]) if "min_size" in props else None
    schema_mode = props.get("parquet_schema")
    if schema_mode not in (None, "compatible"):
        raise HookFailure("'parquet_schema' must be 'compatible'")
    checked = 0
    outside: list[str] = []
    forbidden: list[str] = []
    wrong_ext: list[str] = []
    unreadable: list[str] = []
    too_big: list[str] = []
    too_small: list[str] = []
    schema: list[str] = []
    reader = ObjectReader(ctx.catalog, event)
    for change in event.changes() if event.changes is not None else iter(()):
        if change.kind == "removed" or change.path.startswith(ACTIONS_PREFIX):
            continue
        checked += 1
        p = change.path
        if allowed and not any(fnmatch.fnmatchcase(p, g) for g in allowed):
            outside.append(p)
        if any(fnmatch.fnmatchcase(p, g) for g in denied):
            forbidden.append(p)
        size = change.size or 0
        if max_size is not None and size > max_size:
            too_big.append(f"{p} ({size} bytes)")
        if min_size is not None and size < min_size:
            too_small.append(f"{p} ({size} bytes)")
        if formats:
            fmt = next((f for f in formats if p.lower().endswith(EXTENSIONS[f])), None)
            if fmt is None:
                wrong_ext.append(p)
            else:
                error = reader.format_error(p, fmt)
                if error:
                    unreadable.append(f"{p} ({error})")
        if schema_mode and p.lower().endswith(".parquet"):
            error = reader.schema_error(p)
            if error:
                schema.append(f"{p} ({error})")
    for kind, paths in (
        ("outside allowed_paths", outside), ("match denied_paths", forbidden),
        (f"not of formats {', '.join(formats)}", wrong_ext), ("do not parse as their format", unreadable),
        (f"larger than {max_size} bytes", too_big), (f"smaller than {min_size} bytes", too_small),
        ("change the Parquet schema incompatibly", schema),
    ):
        if paths:
            problems.append(_offenders(kind, paths, limit))
    if problems:
        raise HookFailure("; ".join(problems))
    return f"{checked} object(s) checked: ok"


class ObjectReader:
    """Reads the objects a check looks at: the new versions at ``event.read_ref``, the old ones at ``event.dest_ref``."""

    def __init__(self, catalog: Any, event: Event) -> None:
        self.catalog = catalog
        self.event = event
        self.repository = catalog.repository(event.repo)
        self._dest_schemas: dict[str, Any] = {}

    def _open(self, ref: str, path: str) -> Any:
        entry = self.catalog.stat(self.event.repo, ref, path)
        return self.catalog.open(self.repository, entry)

    def _head(self, ref: str, path: str, n: int) -> bytes:
        entry = self.catalog.stat(self.event.repo, ref, path)
        return bytes(self.catalog.read(self.repository, entry, 0, n))

    def format_error(self, path: str, fmt: str) -> str:
        """Why the object at ``path`` does not parse as ``fmt`` ('' if it does)."""
        ref = self.event.read_ref or self.event.branch
        try:
            if fmt == "parquet":
                schema_of(self._open(ref, path))
                return ""
            if fmt == "json":
                entry = self.catalog.stat(self.event.repo, ref, path)
                if entry.size > MAX_JSON:
                    return f"JSON larger than {MAX_JSON} bytes is not checked"
                json.loads(self.catalog.read(self.repository, entry))
                return ""
            head = self._head(ref, path, SAMPLE)
            text = head.decode("utf-8")
            if fmt == "jsonl":
                lines = text.splitlines()
                for line in lines[:-1] if len(head) == SAMPLE else lines:
                    if line.strip():
                        json.loads(line)
                return ""
            rows = list(csv.reader(io.StringIO(text)))
            if len(head) == SAMPLE and rows:
                rows = rows[:-1]  # the sample may cut the last row
            if rows and any(len(r) != len(rows[0]) for r in rows if r):
                return "rows have different numbers of fields"
            return ""
        except UnicodeDecodeError:
            return "not UTF-8 text"
        except json.JSONDecodeError as exc:
            return f"bad JSON: {exc.msg} at line {exc.lineno}"
        except csv.Error as exc:
            return f"bad CSV: {exc}"
        except HookFailure:
            raise
        except Exception as exc:  # pyarrow raises many types for broken files
            return printable(f"{type(exc).__name__}: {exc}".encode(), 200)

    def schema_error(self, path: str) -> str:
        """Why the new Parquet file at ``path`` is incompatible with its directory on the destination ('' if not)."""
        ref = self.event.read_ref or self.event.branch
        try:
            new = schema_of(self._open(ref, path))
        except Exception as exc:
            return printable(f"unreadable: {type(exc).__name__}: {exc}".encode(), 200)
        old = self._dest_schema(posixpath.dirname(path), path)
        if old is None:
            return ""
        missing = [f.name for f in old if new.get_field_index(f.name) < 0]
        changed = [
            f"{f.name}: {f.type} -> {new.field(f.name).type}"
            for f in old
            if new.get_field_index(f.name) >= 0 and not new.field(f.name).type.equals(f.type)
        ]
        reasons = ([f"drops column(s) {', '.join(missing)}"] if missing else []) + ([f"changes {', '.join(changed)}"] if changed else [])
        return "; ".join(reasons)

    def _dest_schema(self, directory: str, exclude: str) -> Any:
        if directory in self._dest_schemas:
            return self._dest_schemas[directory]
        schema = None
        dest = self.event.dest_ref
        if dest:
            prefix = directory + "/" if directory else ""
            for item in self.catalog.list(self.event.repo, dest, prefix, delimiter="/"):
                if item.entry is not None and item.path.lower().endswith(".parquet") and item.path != exclude:
                    try:
                        schema = schema_of(self.catalog.open(self.repository, item.entry))
                        break
                    except Exception:
                        continue
        self._dest_schemas[directory] = schema
        return schema


def schema_of(stream: Any) -> Any:
    """The Arrow schema of a Parquet file (a seekable stream); raises what pyarrow raises."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise HookFailure("Parquet checks need pyarrow (pip install pyarrow)") from None
    with stream:
        return pq.ParquetFile(stream).schema_arrow


RUNNERS: Final[dict[str, HookRunner]] = {
    "webhook": run_webhook,
    "lakemount_check": run_check,
}

