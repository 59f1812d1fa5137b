"""The S3 gateway: repositories as buckets, ``<ref>/<path>`` as keys, over the catalog.

How a request flows, and where each concern lives:

- ``server.py``      ``lakemount serve``: one socket, several worker processes (uvicorn on
                     httptools + uvloop), each a stateless client of the shared stores;
                     ``service.py`` runs it beside the mount for ``lakemount up``.
- ``asgi.py``        the only module that knows the HTTP framework: requests to worker
                     threads, bodies pulled on demand, responses streamed.
- ``handler.py``     one request: bucket and key (path or virtual-host style), the caller
                     (``access.py``: signatures via ``sig/``, role policies), the
                     operation (``routing.py``), S3 XML errors (``errors.py``, ``xml.py``).
- ``operations/``    one module per S3 operation, each ``handle(ctx) -> Response``.
- ``buckets.py``     what a bucket stands for: a repository, or one ref (flat buckets,
                     aliases); ``listing.py``/``listing_xml.py`` list either kind.
- ``objects.py``     object headers, conditions, ranges, and verified uploads that land
                     (``landing.py``) before they are stored and staged.
- ``multipart.py``   upload state on the ref store's database, parts in the block store.
- ``copying.py``     the source side of CopyObject and UploadPartCopy.
"""
