"""Logins answer alike for an unknown key id and a wrong secret, and repeated failures back off (issue 42 item 3).

In process, on an injected clock (``auth/throttle.py``): the tests count answers, they never wait.  The same
``Authenticator`` serves ``/api/v1/auth/login``, basic auth on any route and the Iceberg catalog's
``oauth/tokens``, so one backoff covers the three.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from lakemount.api.auth import BAD_CREDENTIALS
from lakemount.api.handler import ApiService
from lakemount.app import App
from lakemount.auth.throttle import ADDRESS_FREE, KEY_FREE, MAX_DELAY, LoginThrottle
from lakemount.config import load
from lakemount.serving.http import BytesBody, Request, Response
from tests.gateway.server_fixture import ADMIN_KEY, ADMIN_SECRET, _create_admin


class Clock:
    def __init__(self) -> None:
        self.now = 50_000.0

    def __call__(self) -> float:
        return self.now


def _service(home: Path) -> tuple[ApiService, Clock]:
    env = {"LAKEMOUNT_HOME": str(home)}
    _create_admin(env)
    service = ApiService(App(load(None, env=env)))
    clock = Clock()
    service.authenticator.throttle = LoginThrottle(clock=clock)
    return service, clock


def login(service: ApiService, key: str, secret: str, client: str = "10.1.1.1:5000") -> Response:
    body = json.dumps({"access_key_id": key, "secret_access_key": secret}).encode()
    return service.handle(Request("POST", "/api/v1/auth/login", "", (("content-type", "application/json"),),
                                  BytesBody(body), client))


def token(service: ApiService, key: str, secret: str, client: str = "10.1.1.1:5000") -> Response:
    form = urlencode({"grant_type": "client_credentials", "client_id": key, "client_secret": secret}).encode()
    return service.handle(Request("POST", "/iceberg/api/v1/oauth/tokens", "",
                                  (("content-type", "application/x-www-form-urlencoded"),), BytesBody(form), client))


def basic(service: ApiService, key: str, secret: str, client: str = "10.1.1.1:5000") -> Response:
    auth = "Basic " + base64.b64encode(f"{key}:{secret}".encode()).decode()
    return service.handle(Request("GET", "/api/v1/repositories", "", (("authorization", auth),), BytesBody(), client))


def body(r: Response) -> Any:
    assert isinstance(r.body, bytes)
    return json.loads(r.body)


def test_an_unknown_key_id_and_a_wrong_secret_read_alike(tmp_path: Path) -> None:
    service, _ = _service(tmp_path)
    for call in (login, basic):
        unknown, wrong = call(service, "AKIANOSUCHKEY", "x"), call(service, ADMIN_KEY, "wrong")
        assert unknown.status == wrong.status == 401
        assert body(unknown) == body(wrong) == {"message": BAD_CREDENTIALS}
    unknown, wrong = token(service, "AKIANOSUCHKEY", "x"), token(service, ADMIN_KEY, "wrong")
    assert unknown.status == wrong.status == 401
    assert body(unknown) == body(wrong) == {"error": "invalid_client", "error_description": BAD_CREDENTIALS}
    assert login(service, ADMIN_KEY, ADMIN_SECRET).status == 200


def test_failures_of_a_key_id_back_off_and_a_success_after_the_wait_resets(tmp_path: Path) -> None:
    service, clock = _service(tmp_path)
    # Each failure from its own address: only the key id's count matters here.
    statuses = [login(service, ADMIN_KEY, "wrong", f"10.0.0.{i}:1").status for i in range(KEY_FREE)]
    assert statuses == [401] * KEY_FREE
    assert login(service, ADMIN_KEY, "wrong", "10.0.0.99:1").status == 401  # the first slowed one is still checked
    refused = login(service, ADMIN_KEY, ADMIN_SECRET, "10.0.0.100:1")  # even the right secret waits its turn
    assert refused.status == 429 and refused.header("Retry-After") == "1"
    assert "retry in 1 s" in body(refused)["message"]
    for route in (token, basic):  # the same backoff on every door that checks a secret
        r = route(service, ADMIN_KEY, ADMIN_SECRET, "10.0.0.101:1")
        assert r.status == 429 and r.header("Retry-After") == "1", (route.__name__, r.body)
    assert body(token(service, ADMIN_KEY, ADMIN_SECRET))["error"] == "slow_down"
    clock.now += 1
    assert login(service, ADMIN_KEY, "wrong").status == 401
    r = login(service, ADMIN_KEY, ADMIN_SECRET)
    assert r.status == 429 and r.header("Retry-After") == "2"  # doubled
    waits = []
    for _ in range(6):  # an attacker who waits each time out: the wait stops growing at the cap
        clock.now += int(r.header("Retry-After") or 0)
        assert login(service, ADMIN_KEY, "wrong").status == 401
        r = login(service, ADMIN_KEY, "wrong")
        waits.append(int(r.header("Retry-After") or 0))
    assert waits == [4, 8, 8, 8, 8, 8] and max(waits) == MAX_DELAY
    # The real user, after at most MAX_DELAY seconds: in, and the key id starts afresh.
    clock.now += MAX_DELAY
    assert login(service, ADMIN_KEY, ADMIN_SECRET).status == 200
    assert [login(service, ADMIN_KEY, "wrong").status for _ in range(KEY_FREE)] == [401] * KEY_FREE


def test_an_address_spraying_key_ids_backs_off(tmp_path: Path) -> None:
    service, _ = _service(tmp_path)
    statuses = [login(service, f"AKIAGUESS{i:04d}", "x", "10.9.9.9:4242").status for i in range(ADDRESS_FREE + 1)]
    assert statuses == [401] * (ADDRESS_FREE + 1)
    r = login(service, "AKIAGUESSNEXT", "x", "10.9.9.9:4243")  # another port of the same address
    assert r.status == 429 and r.header("Retry-After") == "1"
    assert login(service, ADMIN_KEY, ADMIN_SECRET, "10.1.1.1:5000").status == 200  # others are not slowed
