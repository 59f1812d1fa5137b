"""One router for the servers that dispatch on a table of routes: the REST API and the Iceberg catalog.

A route is a method and a path template whose ``{name}`` parts match one path segment each.  A table is a
sequence of routes, written out where its server is (``api/routes.py``, ``iceberg/service.py``); this module
finds a request's route in it and names the path parameters, percent-decoded after matching so that an encoded
``/`` inside a segment never splits it.  Whatever else a route carries (its handler, its OpenAPI shapes, whether
it is advertised) is its server's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Generic, Protocol, TypeVar
from urllib.parse import unquote


class Routed(Protocol):
    """What the router reads of a route: its method and its compiled template (``compile_template``)."""

    @property
    def method(self) -> str: ...

    @property
    def pattern(self) -> re.Pattern[str]: ...


R = TypeVar("R", bound=Routed)


def compile_template(template: str) -> re.Pattern[str]:
    """The matcher of a path template: ``{name}`` is one segment (no ``/``), captured as ``name``; the rest is literal."""
    out = "^"
    for part in re.split(r"(\{\w+\})", template):
        out += f"(?P<{part[1:-1]}>[^/]+)" if part.startswith("{") else re.escape(part)
    return re.compile(out + "$")


class Router(Generic[R]):
    """Finds the route of a method and a raw (percent-encoded) path in one table of routes."""

    def __init__(self, routes: Iterable[R]) -> None:
        self.routes = tuple(routes)

    def match(self, method: str, path: str) -> tuple[R | None, dict[str, str], bool]:
        """(route, path parameters, whether the path exists for another method).

        Raises ``UnicodeDecodeError`` when a path parameter's percent-encoding is not UTF-8.
        """
        other = False
        for route in self.routes:
            m = route.pattern.match(path)
            if m is None:
                continue
            if route.method != method:
                other = True
                continue
            return route, {k: unquote(v, errors="strict") for k, v in m.groupdict().items()}, False
        return None, {}, other
