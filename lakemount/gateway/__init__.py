"""The S3 gateway: repositories as buckets, ``<ref>/<path>`` as keys, over the catalog.

How a request flows, and where each concern lives:

- ``server.py``      ``lakemount serve``: one socket, several worker processes (uvicorn on
                     httptools + uvloop), each a stateless client of the shared stores;
                     ``service.py`` runs it beside the mount for ``lakemount up``.
- ``lakemount/serving``  shared with the REST API: the framework-free ``Request`` and
                     ``Response`` (``http.py``), the only module that knows the HTTP
                     framework (``asgi.py``: requests to worker threads, bodies pulled
                     on demand, responses streamed), object bodies out (``bodies.py``:
                     memory-mapped local reads), byte ranges, worker processes.
- ``handler.py``     one request: bucket and key (path or virtual-host style), the caller
                     (``access.py``: signatures via ``sig/``, role policies), the
                     operation (``routing.py``), S3 XML errors (``errors.py``, ``xml.py``).
- ``operations/``    one module per S3 operation, each ``handle(ctx) -> Response``.
- ``context.py``     what an operation gets: the request, the caller, and ``Services``
                     (catalog, access, buckets, uploads, settings), never the gateway.
- ``buckets.py``     what a bucket stands for: a repository, or one ref (flat buckets,
                     aliases); ``listing.py``/``listing_xml.py`` list either kind.
- ``objects.py``     object headers, conditions, copy ranges, and verified uploads written
                     through the catalog's object writer (``catalog/writer.py``) before
                     they are staged.
- ``multipart.py``   S3's multipart limits; parts live in the block store.
  The gateway's own state (bucket records, multipart uploads) is declared in
  ``lakemount/catalog/s3state.py`` (``BucketStore``, ``MultipartStore``) and kept by
  ``lakemount/metastore``; the stores raise lakemount errors, which ``errors.py`` turns
  into S3 codes.
- ``copying.py``     the source side of CopyObject and UploadPartCopy.
- ``sig/``           signatures (SigV4, SigV2) and body verification (aws-chunked, checksums).
"""
