"""``lakemount api``: run the REST API alone in the foreground (systemd: ``lakemount-api.service``)."""

from __future__ import annotations

import json

import click

from lakemount.cli.common import ctx_obj, json_option


@click.command("api")
@click.option("--listen", "listen_address", help="host:port to listen on (default: api.listen_address).")
@click.option("--workers", type=int, help="Worker processes (default: api.workers, 0 = one per CPU up to 4).")
@json_option
def api(listen_address: str | None, workers: int | None) -> None:
    """Run the REST API (lakeFS's /api/v1 for lakeFS's clients) until interrupted.

    With --json the announcement is one JSON object per line: {"message": "..."}.
    """
    from lakemount.api.server import serve_forever, settings_from_config

    app = ctx_obj().app
    settings = settings_from_config(app.config, listen_address=listen_address, workers=workers)
    as_json = ctx_obj().as_json
    serve_forever(
        app.config, settings, announce=lambda line: click.echo(json.dumps({"message": line}) if as_json else line, err=False)
    )


COMMANDS = [api]
