"""Request metrics of the HTTP front ends, summed over worker processes, as Prometheus text.

Each worker process keeps one :class:`Registry` per server it runs (``s3``,
``api``): requests by operation and status, a latency histogram by operation,
body bytes received and sent, requests in flight.  The ASGI adapter records a
request once, when it is answered; the front end names the operation
(``Response.operation``: an S3 operation name or an API operationId, never a
path or a key, so label sets stay few).

Workers are separate processes, so each one's :class:`Publisher` writes its
registry's snapshot every ``PUBLISH_INTERVAL`` seconds and at exit to
``<home>/run/metrics/<server>-<supervisor pid>-<worker pid>.json`` (temp file
and rename).  :func:`exposition` sums every snapshot under the home -- the
serving process's own registries live, the others from their files -- so the
API's ``/metrics`` also shows the gateway that ``serve`` or ``up`` runs beside
it.  A worker that dies leaves its file, and its replacement writes a new one:
counters never go backwards while the server runs (what a killed worker counted
in its last second is lost).  A supervisor removes, when it starts, the files
of supervisors no longer running and its own server's files from an earlier
run under the same pid (a container restarted with the same pids).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import os
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Final

from lakemount.pids import alive

# Seconds: the upper bounds of the latency buckets (Prometheus's defaults), then +Inf.
BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
PUBLISH_INTERVAL: Final = 1.0
CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"

Snapshot = dict[str, Any]


def directory(home: str) -> str:
    """Where the workers of every server sharing ``home`` publish their snapshots."""
    return os.path.join(home, "run", "metrics")


class Registry:
    """The counters of one server (``s3`` or ``api``) in this process; thread-safe."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._lock = threading.Lock()
        self._requests: dict[tuple[str, int], int] = {}
        self._latency: dict[str, list[int]] = {}
        self._seconds: dict[str, float] = {}
        self._received = 0
        self._sent = 0
        self._in_flight = 0
        self.changes = 0  # bumped by every update: the publisher skips unchanged snapshots

    def started(self) -> None:
        """A request arrived (it is in flight until :meth:`finished`)."""
        with self._lock:
            self._in_flight += 1
            self.changes += 1

    def finished(self, operation: str, status: int, received: int, sent: int, seconds: float) -> None:
        """A request started with :meth:`started` was answered (or abandoned) after ``seconds``."""
        slot = bisect.bisect_left(BUCKETS, seconds)
        key = (operation, status)
        with self._lock:
            self._in_flight -= 1
            self._requests[key] = self._requests.get(key, 0) + 1
            counts = self._latency.get(operation)
            if counts is None:
                counts = self._latency[operation] = [0] * (len(BUCKETS) + 1)
                self._seconds[operation] = 0.0
            counts[slot] += 1
            self._seconds[operation] += seconds
            self._received += received
            self._sent += sent
            self.changes += 1

    def snapshot(self) -> Snapshot:
        """The counters as a JSON-able dict (what a worker publishes)."""
        with self._lock:
            return {
                "server": self.server,
                "pid": os.getpid(),
                "requests": [[op, status, n] for (op, status), n in self._requests.items()],
                "latency": {op: [list(counts), self._seconds[op]] for op, counts in self._latency.items()},
                "received": self._received,
                "sent": self._sent,
                "in_flight": self._in_flight,
            }


_REGISTRIES: dict[str, Registry] = {}
_REGISTRIES_LOCK = threading.Lock()


def registry(server: str) -> Registry:
    """This process's registry for ``server`` (created on first use)."""
    with _REGISTRIES_LOCK:
        reg = _REGISTRIES.get(server)
        if reg is None:
            reg = _REGISTRIES[server] = Registry(server)
        return reg


class Publisher:
    """Writes one registry's snapshot under the home every ``interval`` seconds and on :meth:`close`.

    The file names the supervisor (this process's parent) and this process,
    so a restarted worker writes a new file beside its predecessor's.
    """

    def __init__(self, home: str, reg: Registry, interval: float = PUBLISH_INTERVAL) -> None:
        self.reg = reg
        self.interval = interval
        self.dir = directory(home)
        self.path = os.path.join(self.dir, f"{reg.server}-{os.getppid()}-{os.getpid()}.json")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._written = -1

    def start(self) -> None:
        """Publish now and then every ``interval`` seconds from a daemon thread."""
        os.makedirs(self.dir, exist_ok=True)
        self.publish()
        self._thread = threading.Thread(target=self._run, name=f"lm-metrics-{self.reg.server}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.publish()

    def publish(self) -> None:
        """Write the snapshot (temp file and rename) unless nothing changed since the last write."""
        changes = self.reg.changes
        if changes == self._written:
            return
        tmp = os.path.join(self.dir, f".{os.path.basename(self.path)}.tmp")
        with open(tmp, "w") as f:
            json.dump(self.reg.snapshot(), f, separators=(",", ":"))
        os.replace(tmp, self.path)
        self._written = changes

    def close(self) -> None:
        """Stop the thread and publish the final counts (idempotent)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.publish()


@contextlib.contextmanager
def publishing(home: str, reg: Registry | None) -> Iterator[None]:
    """While the block runs (a worker serving), publish ``reg``'s snapshots under ``home``; nothing without a registry."""
    if reg is None:
        yield
        return
    publisher = Publisher(home, reg)
    publisher.start()
    try:
        yield
    finally:
        publisher.close()


def _parse_name(name: str) -> tuple[str, int, int] | None:
    """(server, supervisor pid, worker pid) of a snapshot file name, or None for anything else."""
    if name.startswith(".") or not name.endswith(".json"):
        return None
    parts = name[: -len(".json")].split("-")
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return parts[0], int(parts[1]), int(parts[2])


def clear_stale(home: str, server: str) -> None:
    """Remove snapshots of supervisors that no longer run, and ``server``'s own earlier ones under this pid.

    Called by a supervisor as it starts, before its workers publish.
    """
    path = directory(home)
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return
    me = os.getpid()
    for name in names:
        parsed = _parse_name(name)
        if name.startswith(".") and name.endswith(".tmp"):
            parsed_tmp = _parse_name(name[1 : -len(".tmp")])
            stale = parsed_tmp is None or not alive(parsed_tmp[2])
        elif parsed is None:
            continue
        else:
            srv, supervisor, _ = parsed
            stale = not alive(supervisor) or (supervisor == me and srv == server)
        if stale:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(path, name))


def collect(home: str) -> list[Snapshot]:
    """Every worker's snapshot under ``home``; this process's own registries live, not from their files.

    The in-flight gauge of a worker that no longer runs is dropped.
    """
    me = os.getpid()
    with _REGISTRIES_LOCK:
        own = list(_REGISTRIES.values())
    out = [reg.snapshot() for reg in own]
    mine = {reg.server for reg in own}
    path = directory(home)
    try:
        names = sorted(os.listdir(path))
    except FileNotFoundError:
        names = []
    for name in names:
        parsed = _parse_name(name)
        if parsed is None or (parsed[2] == me and parsed[0] in mine):
            continue
        try:
            with open(os.path.join(path, name)) as f:
                snap = json.load(f)
        except (FileNotFoundError, ValueError):
            continue  # removed by a starting supervisor meanwhile
        if not alive(parsed[2]):
            snap["in_flight"] = 0
        out.append(snap)
    return out


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render(snapshots: Iterable[Snapshot]) -> str:
    """The sum of ``snapshots`` per server as Prometheus text exposition (format 0.0.4)."""
    requests: dict[tuple[str, str, int], int] = {}
    latency: dict[tuple[str, str], list[int]] = {}
    seconds: dict[tuple[str, str], float] = {}
    received: dict[str, int] = {}
    sent: dict[str, int] = {}
    in_flight: dict[str, int] = {}
    for snap in snapshots:
        server = snap["server"]
        for op, status, n in snap["requests"]:
            requests[(server, op, status)] = requests.get((server, op, status), 0) + n
        for op, (counts, total) in snap["latency"].items():
            acc = latency.setdefault((server, op), [0] * (len(BUCKETS) + 1))
            for i, n in enumerate(counts):
                acc[i] += n
            seconds[(server, op)] = seconds.get((server, op), 0.0) + total
        received[server] = received.get(server, 0) + snap["received"]
        sent[server] = sent.get(server, 0) + snap["sent"]
        in_flight[server] = in_flight.get(server, 0) + snap["in_flight"]
    out = [
        "# HELP lakemount_http_requests_total HTTP requests answered, by server, operation and status.",
        "# TYPE lakemount_http_requests_total counter",
    ]
    for (server, op, status), n in sorted(requests.items()):
        out.append(f'lakemount_http_requests_total{{server="{_label(server)}",operation="{_label(op)}",status="{status}"}} {n}')
    out += [
        "# HELP lakemount_http_request_duration_seconds Time from a request's arrival to the end of its response.",
        "# TYPE lakemount_http_request_duration_seconds histogram",
    ]
    for (server, op), counts in sorted(latency.items()):
        labels = f'server="{_label(server)}",operation="{_label(op)}"'
        cumulative = 0
        for bound, n in zip((*BUCKETS, None), counts, strict=True):
            cumulative += n
            le = "+Inf" if bound is None else repr(bound)
            out.append(f'lakemount_http_request_duration_seconds_bucket{{{labels},le="{le}"}} {cumulative}')
        out.append(f"lakemount_http_request_duration_seconds_sum{{{labels}}} {seconds[(server, op)]:.6f}")
        out.append(f"lakemount_http_request_duration_seconds_count{{{labels}}} {cumulative}")
    for name, values, kind, text in (
        ("lakemount_http_bytes_received_total", received, "counter", "Request body bytes read."),
        ("lakemount_http_bytes_sent_total", sent, "counter", "Response body bytes sent."),
        ("lakemount_http_requests_in_flight", in_flight, "gauge", "Requests being served now."),
    ):
        out += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
        for server in sorted(values):
            out.append(f'{name}{{server="{_label(server)}"}} {values[server]}')
    return "\n".join(out) + "\n"


def exposition(home: str) -> str:
    """What ``GET /metrics`` answers: :func:`render` of :func:`collect`."""
    return render(collect(home))
