"""``lakemount serve``: run the S3 gateway and the REST API in the foreground.

Listens on ``gateways.s3.listen_address`` (or ``--listen``) with several
worker processes, each a stateless client of the shared ref store and block
store; the REST API (``lakemount.api``) runs beside it on ``api.listen_address``
(``--api-listen``; ``--no-api`` leaves it out).  Stops cleanly on SIGINT or
SIGTERM (systemd: ``lakemount-gateway.service``, ``lakemount-api.service``).
"""

from __future__ import annotations

import json
from dataclasses import replace

import click

from lakemount.cli.common import ctx_obj, json_option


@click.command("serve")
@click.option("--listen", "listen_address", help="host:port to listen on (default: gateways.s3.listen_address).")
@click.option("--workers", type=int, help="Worker processes (default: gateways.s3.workers, 0 = one per CPU).")
@click.option("--domain-name", help="Domain(s) for virtual-host style requests, comma-separated.")
@click.option("--flat/--no-flat", default=None, help="Flat buckets: each bucket is a repository's default branch.")
@click.option("--tls-cert", "tls_cert_file", help="PEM certificate: serve HTTPS (default: gateways.s3.tls.cert_file).")
@click.option("--tls-key", "tls_key_file", help="PEM private key of --tls-cert (default: gateways.s3.tls.key_file).")
@click.option("--api/--no-api", "with_api", default=True, help="Also run the REST API (default: yes).")
@click.option("--api-listen", "api_listen", help="host:port of the REST API (default: api.listen_address).")
@json_option
def serve(
    listen_address: str | None,
    workers: int | None,
    domain_name: str | None,
    flat: bool | None,
    tls_cert_file: str | None,
    tls_key_file: str | None,
    with_api: bool,
    api_listen: str | None,
) -> None:
    """Run the S3 gateway (bucket = repository, key = REF/PATH) and the REST API until interrupted.

    With --json each announcement (where the gateway and the API listen) is one
    JSON object per line: {"message": "..."}.
    """
    from lakemount.gateway.server import GatewayServer, serve_forever
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
    api = None
    api_line = ""
    gateway = GatewayServer(app.config, settings)
    if with_api:
        from lakemount.api.server import ApiServer, settings_from_config

        # The gateway binds first, so the API tells Iceberg clients where it really listens (--listen, a free
        # port, --tls-cert) in /v1/config's s3.endpoint, not where the configuration file says.
        gateway.start()
        host, port = gateway.address
        s3 = replace(app.config.gateways.s3, listen_address=f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
                     tls=replace(app.config.gateways.s3.tls, cert_file=settings.tls_cert_file,
                                 key_file=settings.tls_key_file))
        api_config = replace(app.config, gateways=replace(app.config.gateways, s3=s3))
        api_settings = settings_from_config(app.config, listen_address=api_listen)
        if api_listen is None and settings.port == 0:
            # A gateway on a free port (tests, benchmarks): the API takes one too.
            api_settings = replace(api_settings, port=0)
        api = ApiServer(api_config, api_settings)
        try:
            api.start()
            api_line = f"lakemount API listening on {api.url}/api/v1 ({api.settings.workers} workers); web UI: {api.url}/"
        except OSError as e:
            if api_listen is not None:
                gateway.stop()
                raise
            api.stop()
            api = None
            api_line = f"lakemount API not started: {e.strerror}; use --api-listen"

    as_json = ctx_obj().as_json

    def say(line: str, err: bool = False) -> None:
        click.echo(json.dumps({"message": line}) if as_json else line, err=err)

    def announce(line: str) -> None:
        # The gateway's line comes first: scripts read it to find the gateway.
        say(line)
        if api_line:
            say(api_line, err=api is None)
        if not app.auth.list_users(limit=1):
            # Only `up` creates the first user (DESIGN: credentials on first `up`): without one nobody can log in.
            say(NO_USER_HINT, err=True)

    try:
        serve_forever(app.config, settings, announce=announce, server=gateway)
    finally:
        if api is not None:
            api.stop()


NO_USER_HINT = ("no user yet, so no one can log in (web UI, API, S3): `lakemount up` creates the user admin and prints "
                "its key once; or: lakemount auth users create --id admin && lakemount auth users policies attach "
                "--id admin --policy Admin && lakemount auth users credentials create --id admin")

COMMANDS = [serve]
