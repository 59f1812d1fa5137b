"""The gateway as a service of ``lakemount up``: it serves, and the first ``up`` creates an admin (and default groups) and shows its keys once."""

from __future__ import annotations

import re
from pathlib import Path

import boto3
import pytest

from lakemount.app import App
from lakemount.config import load
from lakemount.gateway import service


def make_app(home: Path) -> App:
    return App(load(None, env={"LAKEMOUNT_HOME": str(home), "LAKEMOUNT_GATEWAYS_S3_LISTEN_ADDRESS": "127.0.0.1:0",
                               "LAKEMOUNT_GATEWAYS_S3_WORKERS": "1"}))


def test_first_up_creates_an_admin_and_prints_its_keys_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    app = make_app(tmp_path)
    service.start_for_up(app)
    try:
        out = capsys.readouterr().out
        url = re.search(r"S3 gateway: (http://\S+)", out)
        key = re.search(r"access_key_id:\s+(\S+)", out)
        secret = re.search(r"secret_access_key:\s+(\S+)", out)
        assert url and key and secret, out
        s3 = boto3.client("s3", endpoint_url=url.group(1), aws_access_key_id=key.group(1),
                          aws_secret_access_key=secret.group(1), region_name="us-east-1")
        s3.create_bucket(Bucket="up-bucket")
        s3.put_object(Bucket="up-bucket", Key="main/hello.txt", Body=b"hi")
        assert app.catalog.read(app.catalog.repository("up-bucket"), app.catalog.stat("up-bucket", "main", "hello.txt")) == b"hi"
    finally:
        service.stop_for_up(app)
    app2 = make_app(tmp_path)
    service.start_for_up(app2)
    service.stop_for_up(app2)
    again = capsys.readouterr().out
    assert "S3 gateway:" in again and "secret_access_key" not in again
    assert [u.id for u in app2.auth.list_users()] == ["admin"]
    assert app2.auth.list_user_policies("admin") == ["Admin"]
    # The first up also made lakeFS-like default groups, admin in Admins.
    groups = {g.id: app2.auth.list_group_policies(g.id) for g in app2.auth.list_groups()}
    assert groups == {"Admins": ["Admin"], "Developers": ["Developer"], "Viewers": ["Analyst"]}
    assert [g.id for g in app2.auth.list_user_groups("admin")] == ["Admins"]
