"""The router the API and the Iceberg catalog share (``lakemount/serving/routes.py``), and the catalog's table."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from lakemount.iceberg import service
from lakemount.serving.routes import Router, compile_template


@dataclass(frozen=True)
class R:
    method: str
    template: str

    @property
    def pattern(self) -> re.Pattern[str]:
        return compile_template(self.template)


def test_a_segment_parameter_is_decoded_after_matching() -> None:
    router = Router([R("GET", "/repositories/{repository}/objects"), R("POST", "/repositories/{repository}")])
    route, params, other = router.match("GET", "/repositories/a%2Fb/objects")
    assert route == R("GET", "/repositories/{repository}/objects") and params == {"repository": "a/b"} and not other
    assert router.match("GET", "/repositories/a/b/objects") == (None, {}, False)  # a raw / is a segment's end


def test_another_method_and_no_route_are_told_apart() -> None:
    router = Router([R("POST", "/repositories/{repository}")])
    assert router.match("GET", "/repositories/x") == (None, {}, True)
    assert router.match("GET", "/nothing") == (None, {}, False)


def test_a_parameter_that_is_not_utf8_raises() -> None:
    with pytest.raises(UnicodeDecodeError):
        Router([R("GET", "/{x}")]).match("GET", "/%ff")


def test_template_literals_are_literal() -> None:
    assert compile_template("/a.b/{c}").match("/a.b/x") and not compile_template("/a.b/{c}").match("/axb/x")


def test_the_iceberg_table_lists_every_declared_route_once() -> None:
    """Declaring a route (``service.route``) registers nothing: one missing from ``ROUTES`` is neither served nor advertised."""
    declared = {name for name, value in vars(service).items() if isinstance(value, service.Route)}
    assert len(declared) > 20
    assert {r.name for r in service.ROUTES} == declared and len(service.ROUTES) == len(declared)
    assert service.endpoints() == [r.endpoint() for r in service.ROUTES if r.advertised]
    assert service.ROUTER.routes == service.ROUTES
