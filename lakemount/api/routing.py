"""What an operation of the API is: its method, path template, parameters and shapes, and the function that runs it.

A resource module under ``operations/`` declares each of its operations with :func:`operation`, which makes the
module's name for it an :class:`Operation` and registers nothing: ``routes.py`` lists every operation in one
explicit table, which drives dispatch (``handler.py``, through the servers' shared router ``serving/routes.py``),
query-parameter checks and the served OpenAPI document (``openapi.py``), so what is documented is what is routed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lakemount.api.pagination import DEFAULT_AMOUNT, MAX_AMOUNT
from lakemount.serving.http import Response
from lakemount.serving.routes import compile_template


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
    """One operation: ``func(ctx)`` (or the operation called as a function) returns a ``Response`` (see ``context.py``)."""

    method: str
    template: str
    operation_id: str
    func: Callable[[Any], Response]
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
    pattern: re.Pattern[str] = field(default=re.compile(""), compare=False)

    def __call__(self, ctx: Any) -> Response:
        return self.func(ctx)


# Every listing declares this one ``amount``; ``Ctx.page_size`` reads it and ``pagination.page_size`` judges it.
AMOUNT = Param("amount", "integer", description=(
    f"how many items to return: at most {MAX_AMOUNT} (a larger amount is served as {MAX_AMOUNT}, the page's "
    f"max_per_page); none, 0 or -1: {DEFAULT_AMOUNT}"))
PAGINATION = (
    Param("prefix", description="return items prefixed with this value"),
    Param("after", description="return items after this value"),
    AMOUNT,
)


def operation(method: str, template: str, operation_id: str, *, tag: str, summary: str,
              **kw: Any) -> Callable[[Callable[[Any], Response]], Operation]:
    """Declare ``func`` an operation (decorator): its name in the module becomes the :class:`Operation`, which
    ``routes.py`` must list to serve it; the keywords are :class:`Operation` fields."""

    def declare(func: Callable[[Any], Response]) -> Operation:
        return Operation(method, template, operation_id, func, tag, summary, pattern=compile_template(template), **kw)

    return declare
