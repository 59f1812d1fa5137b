"""A session is its access key's: deleting the key ends it, detaching a policy narrows it (issue 42 item 2).

Against a live ``lakemount serve`` (two API workers, each with its own auth cache): a bearer token from the Iceberg
catalog's ``oauth/tokens`` and a UI cookie from ``/api/v1/auth/login``, minted from a key that
``lakemount auth users credentials delete`` then deletes, are refused within the auth cache's bound
(``api/auth.py`` ``TTL``); the tests wait on the refusal with a deadline, they do not sleep a fixed time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import requests

from lakemount.api.auth import TTL
from tests.api.conftest import Served

# The bound, plus what a loaded machine may take to answer the requests that observe it.
DEADLINE = TTL + 10.0


def _within(what: str, done: Callable[[], bool]) -> float:
    """Seconds until ``done()`` held, polled; fails naming ``what`` past ``DEADLINE``."""
    start = time.monotonic()
    while not done():
        if time.monotonic() - start > DEADLINE:
            raise AssertionError(f"{what} within {DEADLINE:g} s")
        time.sleep(0.2)
    return time.monotonic() - start


def _iceberg_token(served: Served, key: str, secret: str) -> str:
    r = requests.post(f"{served.api}/iceberg/api/v1/oauth/tokens", timeout=30,
                      data={"grant_type": "client_credentials", "client_id": key, "client_secret": secret})
    assert r.status_code == 200, r.text
    return str(r.json()["access_token"])


def _cookie(served: Served, key: str, secret: str) -> str:
    r = requests.post(f"{served.api}/api/v1/auth/login", json={"access_key_id": key, "secret_access_key": secret},
                      timeout=30)
    assert r.status_code == 200, r.text
    return str(r.cookies["internal_auth_session"])


def _namespaces(served: Served, token: str) -> int:
    return requests.get(f"{served.api}/iceberg/api/v1/namespaces", headers={"Authorization": f"Bearer {token}"},
                        timeout=30).status_code


def _create_namespace(served: Served, token: str, levels: list[str]) -> int:
    return requests.post(f"{served.api}/iceberg/api/v1/namespaces", headers={"Authorization": f"Bearer {token}"},
                         json={"namespace": levels}, timeout=30).status_code


def _repositories(served: Served, cookie: str) -> int:
    return requests.get(f"{served.api}/api/v1/repositories", cookies={"internal_auth_session": cookie},
                        timeout=30).status_code


def test_deleting_a_key_ends_its_token_and_its_cookie_within_the_cache_bound(served: Served) -> None:
    repo = str(served.repo().id)
    key, secret = served.gateway.user("leaked", "Developer")
    token, cookie = _iceberg_token(served, key, secret), _cookie(served, key, secret)
    assert _namespaces(served, token) == 200
    assert _create_namespace(served, token, [repo, "main", "before"]) == 200
    assert _repositories(served, cookie) == 200
    served.gateway.cli("auth", "users", "credentials", "delete", "--id", "leaked", "--access-key-id", key)
    deleted = time.monotonic()
    took = _within("the token and the cookie of the deleted key were not refused",
                   lambda: _namespaces(served, token) == 401 and _repositories(served, cookie) == 401)
    # Refused for good, by every worker, and for writes too, once the cache's bound has passed: each API worker
    # keeps its own cache, so until then one worker may refuse while another still answers from its copy.
    time.sleep(max(0.0, deleted + TTL + 0.5 - time.monotonic()))
    for _ in range(4):
        assert _namespaces(served, token) == 401 and _repositories(served, cookie) == 401
        assert _create_namespace(served, token, [repo, "main", "after"]) == 401
    assert took <= DEADLINE


def test_a_session_of_another_key_of_the_same_user_lives_on(served: Served) -> None:
    first, first_secret = served.gateway.user("twokeys", "Developer")
    second, second_secret = served.gateway.user("twokeys")
    kept, dropped = _iceberg_token(served, second, second_secret), _iceberg_token(served, first, first_secret)
    served.gateway.cli("auth", "users", "credentials", "delete", "--id", "twokeys", "--access-key-id", first)
    _within("the token of the deleted key was not refused", lambda: _namespaces(served, dropped) == 401)
    assert _namespaces(served, kept) == 200


def test_detaching_a_policy_narrows_every_session_within_the_cache_bound(served: Served) -> None:
    repo = str(served.repo().id)
    key, secret = served.gateway.user("narrowed", "Developer")
    token = _iceberg_token(served, key, secret)
    assert _create_namespace(served, token, [repo, "main", "before"]) == 200
    served.gateway.cli("auth", "users", "policies", "detach", "--id", "narrowed", "--policy", "Developer")
    n = iter(range(1000))
    _within("the token kept the detached policy's right to write",
            lambda: _create_namespace(served, token, [repo, "main", f"after{next(n)}"]) == 403)
    assert _namespaces(served, token) == 200  # still a session: it lists what it may read (nothing, here)
