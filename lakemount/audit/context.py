"""Who is acting: set once per request (gateway, API) or per process (CLI, jobs) at the edge.

The catalog records versioning verbs (commit, merge, ...) where they happen,
without knowing who asked; it reads the actor from here.  A context variable,
so each request thread (and each trio task) sees its own.  ``Pending`` is the
record a request builds up: the edge opens it, the operation notes what it
resolved (:func:`note`), and the edge writes it with the response's status.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager

from lakemount.records import record


@record(frozen=True, slots=True)
class Actor:
    """The user, the front end and the client address of what runs now."""

    user: str
    frontend: str
    client: str = ""


@record(slots=True)
class Pending:
    """What one request did, filled in as it runs; the edge records it when the response is known."""

    op: str = ""
    repo: str = ""
    ref: str = ""
    commit: str = ""
    path: str = ""
    bytes: int = 0


_actor: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("lakemount_audit_actor", default=None)
_pending: contextvars.ContextVar[Pending | None] = contextvars.ContextVar("lakemount_audit_pending", default=None)


def current() -> Actor | None:
    """The actor of the running request or process, if an edge set one."""
    return _actor.get()


Tokens = tuple["contextvars.Token[Actor | None]", "contextvars.Token[Pending | None]"]


def enter(actor: Actor, pending: Pending | None = None) -> Tokens:
    """Make ``actor`` act, with ``pending`` the request's record, until :func:`leave` is given what this returns.

    What :func:`acting` does, as two plain calls for the edges' per-request path (``try``/``finally`` around the
    operation): the generator-based context manager cost six Python calls per request.
    """
    return _actor.set(actor), _pending.set(pending)


def leave(tokens: Tokens) -> None:
    """Undo :func:`enter`."""
    _pending.reset(tokens[1])
    _actor.reset(tokens[0])


@contextmanager
def acting(actor: Actor, pending: Pending | None = None) -> Iterator[Pending | None]:
    """Run the block as ``actor``, with ``pending`` the request's record (yielded back)."""
    tokens = enter(actor, pending)
    try:
        yield pending
    finally:
        leave(tokens)


def act_as(actor: Actor) -> None:
    """Make ``actor`` act for the rest of this context (a CLI process, a job): no block to leave."""
    _actor.set(actor)


def note(*, repo: str | None = None, ref: str | None = None, commit: str | None = None, path: str | None = None,
         op: str | None = None, nbytes: int | None = None) -> None:
    """Add what an operation resolved to the running request's record; nothing outside a request."""
    p = _pending.get()
    if p is None:
        return
    if repo is not None:
        p.repo = repo
    if ref is not None:
        p.ref = ref
    if commit is not None:
        p.commit = commit
    if path is not None:
        p.path = path
    if op is not None:
        p.op = op
    if nbytes is not None:
        p.bytes = nbytes
