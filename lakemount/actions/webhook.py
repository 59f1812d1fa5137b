"""The ``webhook`` hook type (lakeFS's): POST the event JSON to a URL, pass on any 2xx answer.

``webhook`` POSTs the event JSON to ``url`` (``query_params`` and ``headers``
added; ``timeout`` a Go-style duration such as ``30s`` or ``1m30s``, default
1m, bounds the whole exchange; one over ``actions.webhook.max_timeout`` fails
the hook).  Any 2xx answer passes; another status (a redirect is not followed), a
timeout, a refused connection or a response that is not HTTP fails the hook,
with the status and the start of the body (control characters removed) as its
message.  Where it may connect is the server's policy (``network.py``): a
refused address fails the hook.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import urllib.parse
from typing import Any, Final

from lakemount.actions.events import Event
from lakemount.actions.hook import HookContext, HookFailure, printable
from lakemount.actions.network import WebhookRefused, default_policy, guarded_connection
from lakemount.actions.parser import Hook

DEFAULT_TIMEOUT: Final = 60.0
MAX_BODY: Final = 64 * 1024


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
    conn = guarded_connection(parts.scheme, policy, parts.hostname, port, timeout)
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
