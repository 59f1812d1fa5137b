"""Counting PostgreSQL's transactions, LISTEN backends' wake-ups included: what the benchmarks share.

PostgreSQL 15 publishes a backend's counters (``pg_stat_database.xact_commit``) late in two ways (measured in
stop 50, docs/SCALE.md): a backend woken by a notice reads the notify queue in a transaction of its own but
publishes it only when it next runs a statement or exits, and a LISTEN connection runs none, so its wake-ups show
only when it disconnects; and a busy backend publishes at most once a second, what it ran in its last second
before going idle only after 10 s idle (``PGSTAT_IDLE_INTERVAL``).  So a count first ends the listening backends
(:func:`end_listeners`: a backend publishes at exit) and waits for their processes to listen again, then waits
``STATS_WAIT_S``.  The functions return SQL text, so a benchmark runs it however it reaches the server
(``psql`` in a harness's namespace, a psycopg2 cursor).
"""

from __future__ import annotations

from typing import Final

STATS_WAIT_S: Final = 11.0  # until every idle backend has published what it counted


def listeners(db: str) -> str:
    """The process ids of ``db``'s backends LISTENing for change notices (one per listening process)."""
    return f"SELECT pid FROM pg_stat_activity WHERE datname = '{db}' AND query LIKE 'LISTEN %'"


def end_listeners(db: str, pids: list[str]) -> str:
    """One statement ending the listening backends ``pids`` (each publishes at exit) and waiting, 60 s at most, until
    as many others listen on ``db`` again (their processes reconnect).  One session ends them and waits for their
    return: a connection each poll would add transactions of its own."""
    ended = ",".join(str(int(p)) for p in pids)
    return f"""DO $$ DECLARE t timestamptz := clock_timestamp(); BEGIN
        PERFORM pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid IN ({ended});
        LOOP
            PERFORM pg_stat_clear_snapshot();
            EXIT WHEN (SELECT count(*) FROM pg_stat_activity WHERE datname = '{db}' AND query LIKE 'LISTEN %'
                       AND pid NOT IN ({ended})) >= {len(pids)};
            IF clock_timestamp() - t > interval '60 seconds' THEN RAISE EXCEPTION 'the listeners did not come back'; END IF;
            PERFORM pg_sleep(0.05);
        END LOOP; END $$"""


def xact_count(db: str) -> str:
    """``xact_commit + xact_rollback`` of ``db`` now, read past any snapshot the session holds (two columns: the
    first is the cleared snapshot's empty value)."""
    return f"SELECT pg_stat_clear_snapshot(), xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '{db}'"


def backends(db: str) -> str:
    """How many backends ``db`` has (0 once every process using it has disconnected: each published at exit)."""
    return f"SELECT pg_stat_clear_snapshot(), count(*) FROM pg_stat_activity WHERE datname = '{db}'"
