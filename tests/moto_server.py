"""One way to run a moto S3 server in the test process: ``moto_s3(*buckets)`` yields its endpoint URL."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "region_name": "us-east-1"}
"""What moto accepts, in boto3's keyword names."""


@contextlib.contextmanager
def moto_s3(*buckets: str) -> Iterator[str]:
    """A moto S3 server on a free loopback port holding ``buckets``; stopped on leaving, even on failure."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        if buckets:
            import boto3

            client = boto3.client("s3", endpoint_url=endpoint, **CREDENTIALS)
            for bucket in buckets:
                client.create_bucket(Bucket=bucket)
        yield endpoint
    finally:
        server.stop()
