"""The route table: every operation of the API with its method, path template, parameters and shapes.

Resource modules declare operations with :func:`operation`; the table drives
dispatch (``handler.py``), query-parameter checks and the served OpenAPI
document (``openapi.py``), so what is documented is what is routed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from lakemount.api.pagination import DEFAULT_AMOUNT, MAX_AMOUNT


@dataclass(frozen=True, slots=True)
class Param:
    """A query (or header) parameter: name, JSON type, required, repeated."""

    name: str
    type: str = "string"
    required: bool = False
    array: bool = False
    where: str = "query"
    description: str = ""
    minimum: int | None = None
    maximum: int | None = None


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation: ``func(ctx)`` returns a ``Response`` (see ``context.py``)."""

    method: str
    template: str
    operation_id: str
    func: Callable[[Any], Any]
    tag: str
    summary: str
    params: tuple[Param, ...] = ()
    body: str | None = None  # component name of a JSON body; "raw" for object data
    body_required: bool = True
    response: str | None = None  # component name of the success body
    status: int = 200
    content_type: str = "application/json"
    errors: tuple[int, ...] = (400, 401, 404)
    auth: bool = True
    regex: re.Pattern[str] = field(default=re.compile(""), compare=False)


OPERATIONS: list[Operation] = []

# Every listing declares this one ``amount``; ``Ctx.page_size`` reads it and ``pagination.page_size`` judges it.
AMOUNT = Param("amount", "integer", description=(
    f"how many items to return: at most {MAX_AMOUNT} (a larger amount is served as {MAX_AMOUNT}, the page's "
    f"max_per_page); none, 0 or -1: {DEFAULT_AMOUNT}"))
PAGINATION = (
    Param("prefix", description="return items prefixed with this value"),
    Param("after", description="return items after this value"),
    AMOUNT,
)


def _compile(template: str) -> re.Pattern[str]:
    out = "^"
    for part in re.split(r"(\{\w+\})", template):
        if part.startswith("{"):
            out += f"(?P<{part[1:-1]}>[^/]+)"
        else:
            out += re.escape(part)
    return re.compile(out + "$")


def operation(method: str, template: str, operation_id: str, *, tag: str, summary: str, **kw: Any) -> Callable[[Callable[[Any], Any]], Callable[[Any], Any]]:
    """Register ``func`` as an operation (decorator); the keywords are :class:`Operation` fields."""

    def register(func: Callable[[Any], Any]) -> Callable[[Any], Any]:
        OPERATIONS.append(
            Operation(method, template, operation_id, func, tag, summary, regex=_compile(template), **kw)
        )
        return func

    return register


class Router:
    """Finds the operation for a method and a raw (percent-encoded) path below ``/api/v1``."""

    def __init__(self, operations: list[Operation]) -> None:
        self.operations = list(operations)

    def match(self, method: str, path: str) -> tuple[Operation | None, dict[str, str], bool]:
        """(operation, path parameters, whether the path exists for another method).

        Path parameters are percent-decoded after matching, so an encoded
        ``/`` inside a segment never splits it.
        """
        other = False
        for op in self.operations:
            m = op.regex.match(path)
            if m is None:
                continue
            if op.method != method:
                other = True
                continue
            return op, {k: unquote(v, errors="strict") for k, v in m.groupdict().items()}, False
        return None, {}, other
