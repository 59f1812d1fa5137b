"""``metadata.db.url``: both PostgreSQL spellings work, bad URLs and dead servers fail in one line."""

from __future__ import annotations

import pytest

from lakemount.errors import InvalidArgument, Unavailable
from lakemount.metastore.sql import SqlRefStore, make_engine
from lakemount.metastore.urls import normalize, redact
from tests.metastore.conftest import PgCluster


@pytest.mark.parametrize(
    ("given", "driver"),
    [
        ("postgresql://u:p@db.internal/lake", "postgresql+psycopg2"),
        ("postgres://u:p@db.internal/lake", "postgresql+psycopg2"),
        ("postgresql+psycopg2://u:p@db.internal/lake", "postgresql+psycopg2"),
        ("sqlite:////tmp/x.db", "sqlite"),
    ],
)
def test_postgresql_urls_get_the_installed_driver(given: str, driver: str) -> None:
    assert normalize(given).drivername == driver


@pytest.mark.parametrize(
    ("given", "says"),
    [
        ("nourl", "metadata.db.url: not a database URL: 'nourl'"),
        ("mysql://u:secret@h/db", "metadata.db.url: unsupported database 'mysql'"),
        ("postgresql+nosuchdriver://u:secret@h/db", "metadata.db.url: no driver for postgresql+nosuchdriver://u:***@h/db"),
    ],
)
def test_bad_urls_are_one_line_naming_the_key(given: str, says: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        make_engine(given)
    message = str(info.value)
    assert message.startswith(says) and "\n" not in message and "secret" not in message


def test_redact_hides_the_password_even_of_unparsable_text() -> None:
    assert redact("postgresql://u:secret@h/db") == "postgresql://u:***@h/db"
    assert "secret" not in redact("not a url://u:secret@h:x:y/db")


def test_a_dead_server_is_one_line_naming_host_and_port() -> None:
    with pytest.raises(Unavailable) as info:
        SqlRefStore("postgresql://u:secret@127.0.0.1:1/lake")
    message = str(info.value)
    assert "\n" not in message and "secret" not in message
    assert message.startswith("ref store at postgresql 127.0.0.1:1/lake (metadata.db.url): ")


@pytest.mark.postgres
@pytest.mark.parametrize("scheme", ["postgresql", "postgresql+psycopg2", "postgres"])
def test_both_url_forms_reach_a_real_server(pg_cluster: PgCluster, pg_url: str, scheme: str) -> None:
    url = scheme + "://" + pg_url.split("://", 1)[1]
    store = SqlRefStore(url)
    assert store.dialect == "postgresql" and store.engine.driver == "psycopg2"
    assert store.list_repositories() == []
    store.engine.dispose()
