"""``lakemount api``: run the REST API alone in the foreground (systemd: ``lakemount-api.service``)."""

from __future__ import annotations

import click

from lakemount.cli.common import ctx_obj


@click.command("api")
@click.option("--listen", "listen_address", help="host:port to listen on (default: api.listen_address).")
@click.option("--workers", type=int, help="Worker processes (default: api.workers, 0 = one per CPU up to 4).")
def api(listen_address: str | None, workers: int | None) -> None:
    """Run the REST API (lakeFS's /api/v1 for lakeFS's clients) until interrupted."""
    from lakemount.api.server import serve_forever, settings_from_config

    app = ctx_obj().app
    settings = settings_from_config(app.config, listen_address=listen_address, workers=workers)
    serve_forever(app.config, settings, announce=lambda line: click.echo(line, err=False))


COMMANDS = [api]
