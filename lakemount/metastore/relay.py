"""One LISTEN backend per host for a database: the host's listeners share it over a local socket (stop 54).

PostgreSQL runs a transaction in every listening backend for every notice it is woken by (docs/SCALE.md: one
``pg_notify`` with one listener costs 2 transactions, with two 3), so each listening process on a host (a mount, a
gateway worker, a second mount) costs the database a transaction per notice.  The first
:class:`lakemount.metastore.notify.Listener` of a database on a host binds an abstract unix socket named after the
database and the user (:func:`name`), listens on PostgreSQL and passes every payload it hears on to the listeners
that connect to it; the others connect and hear through it.  A relay that goes away (its process stopped or died)
closes its sockets: its followers then race to bind the name, one wins and listens on PostgreSQL, and each tells its
receiver that anything may have changed, as after a lost connection.

An abstract socket lives in the network namespace (the host; a cluster harness's namespaces are hosts of their own),
needs no file and goes with its process.  Both ends check the other's user (``SO_PEERCRED``): a process of another
user holding the name is not followed (its listener then listens on PostgreSQL itself) nor served.

Frames: 4 bytes of length (big-endian), then one byte of kind: ``UP`` (the relay is listening: from now on every
notice reaches the follower), ``DOWN`` (its connection to PostgreSQL was lost: notices may be lost until the next
``UP``), ``IDLE`` (stop 56: nobody on the host used what notices keep true for a while, so the relay stopped
listening: the follower drops what it keeps, as after a lost connection, and the relay listens again, with an ``UP``,
once a follower says it is in use again) or ``NOTICE`` followed by the payload in UTF-8.  A follower sends ``BUSY``
frames (no text) while its process uses what notices keep true, at most one every ``BUSY_EVERY_S``.  The name
carries the protocol's version (``VERSION``): a relay of an older version, which took any frame from a follower for
its end, is never joined by a newer follower.
"""

from __future__ import annotations

import hashlib
import os
import socket
import struct
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import sqlalchemy as sa

UP: Final = b"U"
DOWN: Final = b"D"
NOTICE: Final = b"N"
IDLE: Final = b"I"  # relay -> follower: not listening, as nobody on the host used its notices lately (stop 56)
BUSY: Final = b"B"  # follower -> relay: its process used what notices keep true since its last BUSY
BUSY_EVERY_S: Final = 1.0  # a follower in use says so at most this often (the relay's idle bound is far longer)
VERSION: Final = 2  # of the frames above; in the socket's name (1, stop 54: no IDLE and BUSY, unnamed)
JOIN_WAIT_S: Final = 5.0  # a relay that says nothing this long after a follower joined is not followed
SEND_TIMEOUT_S: Final = 2.0  # a follower that takes no frame for this long is dropped (it rejoins and re-checks all)
_HEAD: Final = struct.Struct(">I")
_CRED: Final = struct.Struct("3i")  # pid, uid, gid


def supported() -> bool:
    """Whether this system has abstract unix sockets with peer credentials (Linux)."""
    return hasattr(socket, "AF_UNIX") and hasattr(socket, "SO_PEERCRED") and os.uname().sysname == "Linux"


def name(url: sa.URL) -> str:
    """The abstract socket's name for the database at ``url`` (its password left out) and this process's user."""
    database = url.set(password=None).render_as_string(hide_password=False)
    digest = hashlib.sha256(f"{os.geteuid()}\0{database}".encode()).hexdigest()[:32]
    return f"\0lakemount-notices{VERSION}-{digest}"


def same_user(sock: socket.socket) -> bool:
    """Whether the process at the other end of ``sock`` runs as this process's user."""
    _, uid, _ = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return uid == os.geteuid()


def join(where: str) -> socket.socket | None:
    """A connection to the host's relay named ``where``, or None when there is none (or it is another user's:
    ``PermissionError``, so the caller listens itself instead of waiting for a name it can never take)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(where)
    except (ConnectionRefusedError, FileNotFoundError):
        sock.close()
        return None
    if not same_user(sock):
        sock.close()
        raise PermissionError("the host's notice relay runs as another user")
    return sock


def claim(where: str) -> socket.socket | None:
    """The relay's listening socket bound to ``where``, or None when another process holds the name."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(where)
    except OSError:  # EADDRINUSE: another listener of the host won the name
        sock.close()
        return None
    sock.listen(64)
    return sock


def frame(kind: bytes, text: str = "") -> bytes:
    """One frame of ``kind`` carrying ``text``."""
    body = kind + text.encode("utf-8")
    return _HEAD.pack(len(body)) + body


def frames(buf: bytearray) -> list[tuple[bytes, str]]:
    """The whole frames at the start of ``buf`` (taken off it): (kind, text) each."""
    out: list[tuple[bytes, str]] = []
    while len(buf) >= _HEAD.size:
        (n,) = _HEAD.unpack_from(buf)
        if len(buf) < _HEAD.size + n:
            break
        body = bytes(buf[_HEAD.size : _HEAD.size + n])
        del buf[: _HEAD.size + n]
        out.append((body[:1], body[1:].decode("utf-8")))
    return out
