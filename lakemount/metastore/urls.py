"""Ref store URLs: which driver a ``metadata.db.url`` gets, and how failures are told in one line.

SQLAlchemy 2.1 maps a bare ``postgresql://`` URL to psycopg 3, which lakemount
does not ship: psycopg2 (``psycopg2-binary``) is its PostgreSQL driver, the one
the hot paths (:mod:`lakemount.metastore.fastsql`) and the change listener
(:mod:`lakemount.metastore.notify`) are written and tested against.  So
``postgresql://`` and ``postgres://`` mean ``postgresql+psycopg2://``; a URL that
names another driver explicitly (``postgresql+psycopg://``) is kept as written
and fails with a one-line error if that driver is not installed.  Every error
names the configuration key or the server, never a traceback, and never shows
a password.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from lakemount.errors import InvalidArgument

if TYPE_CHECKING:  # imported where used: a quick read of a SQLite store never loads SQLAlchemy
    import sqlalchemy as sa

KEY: Final = "metadata.db.url"
SUPPORTED: Final = ("sqlite", "postgresql")


def redact(url: str | sa.URL) -> str:
    """``url`` as text with its password replaced by ``***`` (safe to log or print)."""
    import sqlalchemy as sa

    if isinstance(url, str):
        text = url
        try:
            url = sa.make_url(text)
        except (sa.exc.ArgumentError, ValueError):
            scheme, sep, rest = text.partition("://")
            return scheme + sep + rest.rpartition("@")[2] if "@" in rest else text
    return url.render_as_string(hide_password=True)


def normalize(url: str) -> sa.URL:
    """Parse ``url`` and pick its driver (psycopg2 for a bare ``postgresql://``).

    Raises ``InvalidArgument`` naming ``metadata.db.url`` for text that is not a
    URL or names a database other than SQLite or PostgreSQL.
    """
    import sqlalchemy as sa

    text = str(url).strip()
    if text.startswith("postgres://"):  # the Heroku / libpq spelling
        text = "postgresql://" + text[len("postgres://") :]
    try:
        parsed = sa.make_url(text)
    except (sa.exc.ArgumentError, ValueError):
        raise InvalidArgument(
            f"{KEY}: not a database URL: {redact(text)!r} (e.g. postgresql://user:pass@host/db or sqlite:///path/refs.db)"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in SUPPORTED:
        raise InvalidArgument(f"{KEY}: unsupported database {backend!r} in {redact(parsed)} (use sqlite or postgresql)")
    if parsed.drivername == "postgresql":
        parsed = parsed.set(drivername="postgresql+psycopg2")
    return parsed


def where(url: sa.URL) -> str:
    """The server a URL points at, as ``host:port`` (or the SQLite file), for error messages."""
    if url.get_backend_name() == "sqlite":
        return f"sqlite {url.database or ':memory:'}"
    host = url.host or url.query.get("host") or "localhost"
    if isinstance(host, tuple):
        host = ",".join(host)
    port = url.port or url.query.get("port") or 5432
    if isinstance(port, tuple):
        port = ",".join(port)
    return f"postgresql {host}:{port}/{url.database or ''}"


def one_line(exc: BaseException) -> str:
    """The first non-empty line of a driver's message (libpq's run over several)."""
    orig = getattr(exc, "orig", None) or exc
    for line in str(orig).splitlines():
        line = line.strip()
        if line:
            return line
    return type(orig).__name__
