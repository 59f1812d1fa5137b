"""What every request pays before its operation runs: the signature check and the request id (stop 57).

Each check is kept: these tests pin that the cheaper forms decide as the old ones did.
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime

import pytest

from lakemount.gateway import handler
from lakemount.gateway.sig import canonical, v4
from lakemount.gateway.sig.clock import AMZ_DATE_FORMAT, parse_amz_date, request_time
from lakemount.gateway.sig.request import HttpRequest

from .server_fixture import ADMIN_KEY, ADMIN_SECRET, signed_headers


def _strptime(value: str) -> datetime | None:
    try:
        return datetime.strptime(value.strip(), AMZ_DATE_FORMAT).replace(tzinfo=UTC)
    except ValueError:
        return None


def test_an_amz_date_is_read_as_strptime_reads_it() -> None:
    rnd = random.Random(57)
    samples = ["20261201T033000Z", " 20261201T033000Z ", "20261301T033000Z", "20260229T000000Z", "20240229T000000Z",
               "20261201T246000Z", "20261201T235960Z", "2026121T0330000Z", "20261201t033000Z", "20261201T033000z",
               "\uff120261201T033000Z", "00001201T000000Z", "20261201T03300Z", "20261201 033000Z", ""]
    for _ in range(2000):
        digits = [rnd.choice("0123456789") for _ in range(14)]
        samples.append("".join(digits[:8]) + "T" + "".join(digits[8:]) + "Z")
    for text in samples:
        assert parse_amz_date(text) == _strptime(text), text
    # The signing time's form is the header itself when it has the exact shape, else what strftime writes.
    assert request_time({"x-amz-date": ["20261201T033000Z"]}) == (_strptime("20261201T033000Z"), "20261201T033000Z")
    assert request_time({"x-amz-date": ["20261201t033000Z"]}) == (_strptime("20261201T033000Z"), "20261201T033000Z")


def _verify(method: str, url: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """Verify a request signed as botocore signs it; returns how many canonical queries were made."""
    made = itertools.count()
    real = canonical.canonical_query

    def counting(*args: object, **kw: object) -> str:
        next(made)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(v4, "canonical_query", counting)
    headers = signed_headers(method, url, {}, v4.EMPTY_SHA256)
    path, _, query = url.split("://", 1)[1].partition("/")[2].partition("?")
    request = HttpRequest(method, "/" + path, query, tuple(headers.items()))
    result = v4.verify_header(request, lambda key: ADMIN_SECRET if key == ADMIN_KEY else (_ for _ in ()).throw(KeyError(key)))
    assert result.access_key_id == ADMIN_KEY
    return next(made)


def test_a_request_signed_the_aws_way_makes_one_canonical_query(monkeypatch: pytest.MonkeyPatch) -> None:
    url = "http://gw/repo?list-type=2&prefix=main%2Fds%2F_temporary%2F&delimiter=%2F&max-keys=2&fetch-owner=false"
    assert _verify("GET", url, monkeypatch) == 1  # three before stop 57: every alternative before the first was tried


def test_a_query_signed_with_plus_as_space_is_still_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    # Signed over "a b" with the space as %20; sent as "+" (a client encoding space as plus): the second form.
    from lakemount.gateway.sig.canonical import canonical_request, uri_encode_path
    from lakemount.gateway.sig.v4 import sign, signing_key, string_to_sign

    amz = datetime.now(UTC).strftime(AMZ_DATE_FORMAT)
    scope = f"{amz[:8]}/us-east-1/s3/aws4_request"
    headers = {"host": "gw", "x-amz-date": amz, "x-amz-content-sha256": v4.EMPTY_SHA256}
    signed = sorted(headers)
    creq = canonical_request("GET", uri_encode_path("/repo"), "list-type=2&prefix=a%20b", {k: [v] for k, v in headers.items()},
                             signed, v4.EMPTY_SHA256)
    sig = sign(signing_key(ADMIN_SECRET, amz[:8], "us-east-1"), string_to_sign(amz, scope, creq))
    headers["authorization"] = f"AWS4-HMAC-SHA256 Credential={ADMIN_KEY}/{scope}, SignedHeaders={';'.join(signed)}, Signature={sig}"
    request = HttpRequest("GET", "/repo", "list-type=2&prefix=a+b", tuple(headers.items()))
    assert v4.verify_header(request, lambda key: ADMIN_SECRET).access_key_id == ADMIN_KEY
    tampered = HttpRequest("GET", "/repo", "list-type=2&prefix=a+c", tuple(headers.items()))
    with pytest.raises(Exception, match="SignatureDoesNotMatch|signature"):
        v4.verify_header(tampered, lambda key: ADMIN_SECRET)


def test_request_ids_are_sixteen_hex_digits_and_do_not_repeat() -> None:
    ids = [handler.new_request_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(i) == 16 and int(i, 16) >= 0 and i == i.upper() for i in ids)


def test_canonical_forms_skip_no_work_that_changes_them() -> None:
    # Unreserved text is returned as it is: the same as decoding and encoding it, over random text of the characters
    # that matter (unreserved, reserved, %XX escapes, a plus, non-ASCII).
    from urllib.parse import quote, unquote_to_bytes

    from lakemount.gateway.sig.request import decode_component

    def encode(raw: str, plus: bool) -> str:
        return quote(unquote_to_bytes(raw.replace("+", "%20") if plus else raw), safe="-_.~")

    rnd = random.Random(57)
    alphabet = "aZ09-_.~+%/ =&\u00e92F"
    for _ in range(20_000):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 8)))
        for plus in (False, True):
            assert canonical._encode_component(text, plus) == encode(text, plus), text
        assert canonical.uri_encode_path(text) == (quote(unquote_to_bytes(text or "/"), safe="/~") or "/"), text
        assert decode_component(text) == unquote_to_bytes(text).decode("utf-8", "surrogateescape"), text


def test_a_requests_header_map_is_made_once() -> None:
    request = HttpRequest("GET", "/b", "", (("Host", "gw"), ("X-Amz-Meta-A", "1"), ("x-amz-meta-a", "2")))
    first = request.header_map()
    assert first == {"host": ["gw"], "x-amz-meta-a": ["1", "2"]} and request.header_map() is first
    assert request == HttpRequest("GET", "/b", "", request.headers)  # the map kept takes no part in equality
