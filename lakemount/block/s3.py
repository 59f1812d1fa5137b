"""``S3Adapter``: the block store on S3 or any S3-compatible service, ``s3://bucket/key``.

A thin translation of the ``BlockAdapter`` contract onto one boto3 client:
ranges are ``Range`` GETs, listing is the ``ListObjectsV2`` paginator, large
files go through the transfer manager (multipart above a threshold).  Both a
single PUT and a completed multipart upload are atomic in S3, which gives the
"absent or whole" guarantee for free.  botocore failures are translated here,
and only here, into the error tree: a missing key is ``ObjectNotFound``, an
unreachable, throttling or refusing endpoint is ``Unavailable`` (after the
client's own retries).  One adapter may be shared by many threads: boto3
clients are thread-safe and the connection pool is sized for it.

``presign`` hands out presigned GET and PUT URLs (lakeFS's ``presign=true``):
signed locally with the adapter's credentials, valid for ``presign_expiry``
seconds, for the endpoint this adapter talks to (so clients must reach that
endpoint too); ``presign=False`` (``blockstore.s3.disable_pre_signed``) turns
them off and ``presign`` then answers None, like the other backends.
"""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, BinaryIO

import boto3
import boto3.exceptions
import boto3.s3.transfer
import botocore.config
import botocore.exceptions

from lakemount.block.ranges import check_range
from lakemount.block.urls import split_url
from lakemount.errors import (
    Conflict,
    InvalidArgument,
    LakeMountError,
    NotFound,
    ObjectNotFound,
    Unavailable,
)
from lakemount.graveler.ports import ObjectInfo

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_s3.type_defs import CopySourceTypeDef

    from lakemount.block.putprocess import PutProcess

SCHEME = "s3"
MiB = 1 << 20
MAX_PRESIGN_EXPIRY = 7 * 24 * 3600  # SigV4's limit on X-Amz-Expires
_PRESIGN_OPS = {"GET": "get_object", "PUT": "put_object"}

_MISSING_KEY = frozenset({"NoSuchKey", "404", "NotFound"})
_DENIED = frozenset(
    {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken"}
)
_TRANSIENT = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "ServiceUnavailable", "InternalError"}
)


class S3Adapter:
    """A ``BlockAdapter`` for ``s3://bucket/key`` URLs.

    Every argument is optional; what is left out comes from boto3's usual
    sources (environment, ``~/.aws``, instance metadata).  With a custom
    ``endpoint_url`` (MinIO, Ceph, moto) path-style addressing is the default
    because such endpoints rarely have wildcard DNS for virtual hosts.
    """

    def __init__(
        self,
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        force_path_style: bool | None = None,
        max_pool_connections: int = 32,
        connect_timeout: float = 5.0,
        read_timeout: float = 60.0,
        max_attempts: int = 5,
        multipart_threshold: int = 8 * MiB,
        multipart_chunksize: int = 8 * MiB,
        max_transfer_concurrency: int = 8,
        list_page_size: int = 1000,
        presign: bool = True,
        presign_expiry: int = 900,
    ) -> None:
        if not 1 <= presign_expiry <= MAX_PRESIGN_EXPIRY:
            raise InvalidArgument(f"blockstore.s3.pre_signed_expiry must be 1..{MAX_PRESIGN_EXPIRY} seconds, got {presign_expiry}")
        self._presign = presign
        self._presign_expiry = presign_expiry
        path_style = force_path_style if force_path_style is not None else endpoint_url is not None
        config = botocore.config.Config(
            region_name=region,
            max_pool_connections=max_pool_connections,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            # "standard" retries connection errors, throttling and 5xx with
            # jittered backoff; max_attempts counts the first try.
            retries={"max_attempts": max_attempts, "mode": "standard"},
            s3={"addressing_style": "path" if path_style else "auto"},
            # SigV4 for presigned URLs too (botocore would presign with legacy SigV2, which newer regions refuse).
            signature_version="s3v4",
        )
        # A private session: boto3's default session is not thread-safe to create clients from.
        session = boto3.session.Session(
            aws_access_key_id=access_key_id,
            aws_secret_access_key=secret_access_key,
            aws_session_token=session_token,
            region_name=region,
        )
        self._client: S3Client = session.client("s3", endpoint_url=endpoint_url, config=config)
        self._transfer = boto3.s3.transfer.TransferConfig(
            multipart_threshold=multipart_threshold,
            multipart_chunksize=multipart_chunksize,
            max_concurrency=max_transfer_concurrency,
        )
        # Only for copies CopyObject refuses (sources above 5 GiB): always part by
        # part, 512 MiB each, so that S3's 10,000 parts reach its 5 TiB object limit.
        self._copy_transfer = boto3.s3.transfer.TransferConfig(
            multipart_threshold=1,
            multipart_chunksize=512 * MiB,
            max_concurrency=max_transfer_concurrency,
        )
        self._list_page_size = list_page_size
        # What a child process needs to build the same adapter: batches of small puts go there (put_many).
        self._options: dict[str, Any] = {
            "endpoint_url": endpoint_url, "region": region, "access_key_id": access_key_id,
            "secret_access_key": secret_access_key, "session_token": session_token, "force_path_style": force_path_style,
            "max_pool_connections": max_pool_connections, "connect_timeout": connect_timeout,
            "read_timeout": read_timeout, "max_attempts": max_attempts,
        }
        self._puts: PutProcess | None = None

    # --- writes --------------------------------------------------------------

    def put(self, url: str, data: bytes) -> None:
        bucket, key = _split_object(url)
        with _translated(url):
            self._client.put_object(Bucket=bucket, Key=key, Body=data)

    def put_many(self, items: Sequence[tuple[str, bytes]]) -> None:
        """Store a batch of small objects (the write-back pipeline's) from a child process with a client of
        its own (``putprocess.py``), so this process spends no time in botocore for them: in a mount that
        time is taken from the request loop (the GIL).  Raises as ``put`` does, and ``Unavailable`` when
        the child died (the next batch starts another)."""
        if self._puts is None:
            from lakemount.block.putprocess import PutProcess

            self._puts = PutProcess(type(self), self._options)
        self._puts.put_many(items)

    def put_file(self, url: str, path: str, *, link: bool = False) -> None:
        bucket, key = _split_object(url)
        with _translated(url):
            try:
                self._client.upload_file(path, bucket, key, Config=self._transfer)
            except (FileNotFoundError, IsADirectoryError):
                raise ObjectNotFound(f"local file {path}") from None

    # --- an object uploaded in parts (the mount's large files, as they are written) ---

    def parts_for(self, url: str) -> S3Adapter:
        """The adapter that uploads ``url`` in parts: this one (a ``PartUploads``, see catalog/streaming.py)."""
        return self

    def start_parts(self, url: str) -> str:
        """Begin a multipart upload of ``url``; returns its upload id.  Nothing is visible until ``finish_parts``."""
        bucket, key = _split_object(url)
        with _translated(url):
            return self._client.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]

    def put_part(self, url: str, upload_id: str, number: int, data: bytes) -> str:
        """Upload part ``number`` (1-based; every part but the last at least 5 MiB); returns its ETag."""
        bucket, key = _split_object(url)
        with _translated(url):
            return self._client.upload_part(
                Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=data
            )["ETag"]

    def finish_parts(self, url: str, upload_id: str, etags: list[str]) -> None:
        """Complete the upload: ``url`` becomes the parts, in order, atomically."""
        bucket, key = _split_object(url)
        parts = [{"PartNumber": n, "ETag": etag} for n, etag in enumerate(etags, 1)]
        with _translated(url):
            self._client.complete_multipart_upload(
                Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}  # type: ignore[typeddict-item]
            )

    def abort_parts(self, url: str, upload_id: str) -> None:
        """Drop the upload and the parts S3 holds for it (an upload already gone is no error)."""
        bucket, key = _split_object(url)
        with contextlib.suppress(NotFound), _translated(url):
            try:
                self._client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
            except botocore.exceptions.ClientError as e:
                if _code(e) != "NoSuchUpload":
                    raise

    def touch(self, url: str) -> None:
        bucket, key = _split_object(url)
        with _translated(url):
            # A server-side self-copy refreshes LastModified without moving data.
            self._client.copy_object(
                Bucket=bucket, Key=key, CopySource={"Bucket": bucket, "Key": key}, MetadataDirective="REPLACE"
            )

    def copy(self, src_url: str, dst_url: str) -> None:
        src_bucket, src_key = _split_object(src_url)
        bucket, key = _split_object(dst_url)
        source: CopySourceTypeDef = {"Bucket": src_bucket, "Key": src_key}
        with _translated(src_url):
            try:
                self._client.copy_object(Bucket=bucket, Key=key, CopySource=source)
            except botocore.exceptions.ClientError as e:
                if _code(e) != "InvalidRequest":
                    raise
                # CopyObject refuses sources above 5 GiB; the managed copy goes part by part.
                self._client.copy(source, bucket, key, Config=self._copy_transfer)

    def delete(self, url: str) -> None:
        bucket, key = _split_object(url)
        with contextlib.suppress(NotFound), _translated(url):
            self._client.delete_object(Bucket=bucket, Key=key)

    # --- presigned URLs -------------------------------------------------------

    def presign(self, url: str, method: str) -> tuple[str, float] | None:
        """A presigned ``method`` (GET or PUT) URL for the object ``url`` and the time it expires; None when disabled.

        Signing is local (no request to S3).  Raises ``InvalidArgument`` for
        another method or a URL without a key.
        """
        if not self._presign:
            return None
        op = _PRESIGN_OPS.get(method)
        if op is None:
            raise InvalidArgument(f"cannot presign {method!r} (GET or PUT)")
        bucket, key = _split_object(url)
        expires = time.time() + self._presign_expiry
        with _translated(url):
            signed = self._client.generate_presigned_url(
                op, Params={"Bucket": bucket, "Key": key}, ExpiresIn=self._presign_expiry
            )
        return signed, expires

    # --- reads ---------------------------------------------------------------

    def get(self, url: str) -> bytes:
        bucket, key = _split_object(url)
        with _translated(url):
            return self._client.get_object(Bucket=bucket, Key=key)["Body"].read()

    def get_range(self, url: str, start: int, length: int) -> bytes:
        check_range(start, length)
        bucket, key = _split_object(url)
        if length == 0:
            self.stat(url)  # still report a missing object
            return b""
        with _translated(url):
            try:
                resp = self._client.get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{start + length - 1}")
            except botocore.exceptions.ClientError as e:
                # S3 answers 416 for a range starting at or past the end; the
                # contract is "fewer bytes at the end", here none.
                if _code(e) == "InvalidRange":
                    return b""
                raise
            return resp["Body"].read()

    def open(self, url: str) -> BinaryIO:
        info = self._head(url)
        bucket, key = _split_object(url)
        raw = _S3Reader(self._client, bucket, key, url, info.size, info.etag)
        return io.BufferedReader(raw, buffer_size=MiB)

    def stat(self, url: str) -> ObjectInfo:
        return self._head(url)

    def _head(self, url: str) -> ObjectInfo:
        bucket, key = _split_object(url)
        with _translated(url):
            resp = self._client.head_object(Bucket=bucket, Key=key)
        return ObjectInfo(
            url=url,
            size=int(resp["ContentLength"]),
            mtime=resp["LastModified"].timestamp(),
            etag=resp["ETag"].strip('"'),
        )

    def exists(self, url: str) -> bool:
        try:
            self._head(url)
        except ObjectNotFound:
            return False
        return True

    def list(self, prefix_url: str) -> Iterator[ObjectInfo]:
        bucket, prefix = _split(prefix_url)
        return self._list(prefix_url, bucket, prefix)

    def _list(self, prefix_url: str, bucket: str, prefix: str) -> Iterator[ObjectInfo]:
        paginator = self._client.get_paginator("list_objects_v2")
        with _translated(prefix_url):
            # S3 lists in UTF-8 byte order of keys, which is URL order.
            for page in paginator.paginate(
                Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": self._list_page_size}
            ):
                for obj in page.get("Contents", []):
                    yield ObjectInfo(
                        url=f"{SCHEME}://{bucket}/{obj['Key']}",
                        size=int(obj["Size"]),
                        mtime=obj["LastModified"].timestamp(),
                        etag=obj["ETag"].strip('"'),
                    )


class _S3Reader(io.RawIOBase):
    """A seekable stream over one S3 object.

    Reads stream from a single GET from the current position; a seek drops
    that GET and the next read opens another at the new position, so both
    sequential and random access cost one request per seek.  Every GET is
    conditional on the ETag seen at open time: if the object is replaced while
    being read, the reader fails with ``Conflict`` instead of mixing versions.
    """

    def __init__(self, client: S3Client, bucket: str, key: str, url: str, size: int, etag: str) -> None:
        super().__init__()
        self._client, self._bucket, self._key, self._url = client, bucket, key, url
        self._size, self._etag = size, etag
        self._pos = 0
        self._body: Any = None

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_SET:
            new = offset
        elif whence == io.SEEK_CUR:
            new = self._pos + offset
        elif whence == io.SEEK_END:
            new = self._size + offset
        else:
            raise ValueError(f"invalid whence: {whence}")
        if new < 0:
            raise ValueError(f"negative seek position {new}")
        if new != self._pos:
            self._drop_body()
            self._pos = new
        return self._pos

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self._size - self._pos)
        if want <= 0:
            return 0
        data = self._read(want)
        buffer[: len(data)] = data
        return len(data)

    def readall(self) -> bytes:
        # One read of the remaining body instead of RawIOBase's 8 KiB loop.
        return self._read(self._size - self._pos) if self._pos < self._size else b""

    def _read(self, want: int) -> bytes:
        with _translated(self._url):
            if self._body is None:
                try:
                    resp = self._client.get_object(
                        Bucket=self._bucket, Key=self._key, Range=f"bytes={self._pos}-", IfMatch=f'"{self._etag}"'
                    )
                except botocore.exceptions.ClientError as e:
                    if _code(e) in ("PreconditionFailed", "412"):
                        raise Conflict(f"{self._url} was replaced while being read") from e
                    raise
                self._body = resp["Body"]
            data: bytes = self._body.read(want)
        if not data:
            raise Unavailable(f"{self._url}: stream ended at byte {self._pos} of {self._size}")
        self._pos += len(data)
        return data

    def _drop_body(self) -> None:
        if self._body is not None:
            with contextlib.suppress(Exception):
                self._body.close()
            self._body = None

    def close(self) -> None:
        self._drop_body()
        super().close()


# --- URLs and errors ---------------------------------------------------------


def _split(url: str) -> tuple[str, str]:
    """``(bucket, key-or-prefix)`` of an ``s3://`` URL; the key may be empty."""
    scheme, rest = split_url(url)
    if scheme != SCHEME:
        raise InvalidArgument(f"not an s3:// URL: {url!r}")
    bucket, _, key = rest.partition("/")
    if not bucket:
        raise InvalidArgument(f"s3 URL without a bucket: {url!r}")
    return bucket, key


def _split_object(url: str) -> tuple[str, str]:
    bucket, key = _split(url)
    if not key:
        raise InvalidArgument(f"s3 URL without an object key: {url!r}")
    return bucket, key


def _code(e: botocore.exceptions.ClientError) -> str:
    return str(e.response.get("Error", {}).get("Code", ""))


def _from_client_error(e: botocore.exceptions.ClientError, url: str) -> LakeMountError:
    code = _code(e)
    status = int(e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    message = e.response.get("Error", {}).get("Message", "") or str(e)
    if code in _MISSING_KEY:
        return ObjectNotFound(url)
    if code == "NoSuchBucket":
        return ObjectNotFound(f"{url} (no such bucket)")
    if code in _DENIED:
        # Retrying will not help, but to the caller the store is unusable, not
        # the request malformed; the message says what to fix.
        return Unavailable(f"S3 refused access to {url}: {code}: {message}")
    if code in _TRANSIENT or status >= 500:
        return Unavailable(f"S3 unavailable for {url}: {code}: {message}")
    return InvalidArgument(f"S3 rejected the request for {url}: {code}: {message}")


@contextlib.contextmanager
def _translated(url: str) -> Iterator[None]:
    """Turn botocore/boto3 exceptions raised inside the block into the error tree."""
    try:
        yield
    except botocore.exceptions.ClientError as e:
        raise _from_client_error(e, url) from e
    except (botocore.exceptions.ParamValidationError, botocore.exceptions.ValidationError) as e:
        raise InvalidArgument(f"invalid S3 request for {url}: {e}") from e
    except botocore.exceptions.BotoCoreError as e:
        raise Unavailable(f"S3 unavailable for {url}: {e}") from e
    except boto3.exceptions.S3UploadFailedError as e:
        # boto3 wraps the ClientError of a failed upload; look through the wrapper.
        cause = e.__cause__ or e.__context__
        if isinstance(cause, botocore.exceptions.ClientError):
            raise _from_client_error(cause, url) from e
        raise Unavailable(f"S3 upload to {url} failed: {e}") from e
    except boto3.exceptions.Boto3Error as e:
        raise Unavailable(f"S3 unavailable for {url}: {e}") from e
