"""A boto3 S3 client built from lakemount's ``blockstore.s3`` settings.

Jobs need two S3 calls the block adapter does not offer: a listing with a
delimiter (to split an import into tasks by "directory") and a server-side
copy onto itself (``touch``).  The client uses the same endpoint, region and
credentials as the adapter, taken through ``block.s3_options``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from typing import Any

from lakemount.block import s3_options
from lakemount.config import Config
from lakemount.errors import InvalidArgument, NotFound, Unavailable


def client_from_config(config: Config) -> Any:
    """A boto3 S3 client for ``config.blockstore.s3`` (endpoint, credentials, path style, retries).

    Imports boto3 on first call; raises whatever boto3 raises for unusable settings.
    """
    import boto3
    import botocore.config

    opts = s3_options(dataclasses.asdict(config.blockstore.s3))
    endpoint = opts.get("endpoint_url")
    path_style = opts.get("force_path_style", endpoint is not None)
    session = boto3.session.Session(
        aws_access_key_id=opts.get("access_key_id"),
        aws_secret_access_key=opts.get("secret_access_key"),
        aws_session_token=opts.get("session_token"),
        region_name=opts.get("region"),
    )
    cfg = botocore.config.Config(
        region_name=opts.get("region"),
        max_pool_connections=int(opts.get("max_pool_connections", 32)),
        retries={"max_attempts": int(opts.get("max_attempts", 5)), "mode": "standard"},
        s3={"addressing_style": "path" if path_style else "auto"},
    )
    return session.client("s3", endpoint_url=endpoint, config=cfg)


@contextlib.contextmanager
def listing_errors(role: str, bucket: str, url: str) -> Iterator[None]:
    """Turn S3's refusals of a listing of ``url`` (in ``bucket``, the job's ``role``: source, export) into
    lakemount errors: ``NotFound`` for a missing bucket, ``Unavailable`` for refused credentials or an
    unreachable endpoint, ``InvalidArgument`` for the rest."""
    import botocore.exceptions

    try:
        yield
    except botocore.exceptions.ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code == "NoSuchBucket":
            raise NotFound(f"{role} bucket does not exist: s3://{bucket}") from None
        if code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch"):
            raise Unavailable(f"S3 refused to list {url}: {code}") from exc
        raise InvalidArgument(f"cannot list {url}: {code}") from exc
    except botocore.exceptions.BotoCoreError as exc:  # no credentials, endpoint down, ...
        raise Unavailable(f"cannot list {url}: {exc}") from exc
