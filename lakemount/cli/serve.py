"""``lakemount serve``: run the S3 gateway in the foreground.

Listens on ``gateways.s3.listen_address`` (or ``--listen``) with several
worker processes, each a stateless client of the shared ref store and block
store; stops cleanly on SIGINT or SIGTERM (systemd: ``lakemount-gateway.service``).
"""

from __future__ import annotations

import json

import click

from lakemount.cli.common import ctx_obj, json_option


@click.command("serve")
@click.option("--listen", "listen_address", help="host:port to listen on (default: gateways.s3.listen_address).")
@click.option("--workers", type=int, help="Worker processes (default: gateways.s3.workers, 0 = one per CPU).")
@click.option("--domain-name", help="Domain(s) for virtual-host style requests, comma-separated.")
@click.option("--flat/--no-flat", default=None, help="Flat buckets: each bucket is a repository's default branch.")
@click.option("--tls-cert", "tls_cert_file", help="PEM certificate: serve HTTPS (default: gateways.s3.tls.cert_file).")
@click.option("--tls-key", "tls_key_file", help="PEM private key of --tls-cert (default: gateways.s3.tls.key_file).")
@json_option
def serve(
    listen_address: str | None,
    workers: int | None,
    domain_name: str | None,
    flat: bool | None,
    tls_cert_file: str | None,
    tls_key_file: str | None,
) -> None:
    """Run the S3 gateway (bucket = repository, key = REF/PATH) until interrupted.

    With --json each announcement (the address it listens on, its stop) is one
    JSON object per line: {"message": "..."}.
    """
    from lakemount.gateway.server import serve_forever
    from lakemount.gateway.settings import from_config

    app = ctx_obj().app
    settings = from_config(
        app.config,
        listen_address=listen_address,
        workers=workers,
        domain_name=domain_name,
        flat=flat,
        tls_cert_file=tls_cert_file,
        tls_key_file=tls_key_file,
    )
    as_json = ctx_obj().as_json
    serve_forever(
        app.config,
        settings,
        announce=lambda line: click.echo(json.dumps({"message": line}) if as_json else line, err=False),
    )


COMMANDS = [serve]
