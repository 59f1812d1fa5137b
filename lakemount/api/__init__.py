"""The REST API: lakeFS's ``/api/v1`` for what lakeFS's Python clients call, over the catalog.

Laid out as the S3 gateway is: the HTTP plumbing at the top, one module per resource under ``operations/``.

- ``handler.py``: which front end a request is for (metrics, the Iceberg catalog, the web UI, this API) and the
  API's dispatch: route, authenticate (``auth.py``: basic auth with access keys, or a signed token from
  ``/auth/login``; ``csrf.py`` for the UI's cookie), check the query, run the operation as its caller.
- ``routes.py``: the route table, every operation listed explicitly; ``routing.py``: what an operation is
  (``Operation``, ``Param``, the ``operation`` declaration); the router is ``serving/routes.py``, shared with the
  Iceberg catalog.
- ``operations/``: ``repositories``, ``branches``, ``refs``, ``commits``, ``tags``, ``objects``, ``staging``,
  ``imports``, ``rules``, ``pulls``, ``users``, ``setup``, and the web UI's own (``events``, ``preview``,
  ``object_diff``, ``iceberg_tables``, ``blame``, ``audit``).
- What an operation receives and answers (``context.py``, with ``ApiCatalog``, the catalog it may call), errors as
  lakeFS's ``{"message": ...}`` bodies and status codes (``errors.py``), its pagination (``pagination.py``), JSON
  shapes (``models.py``, ``schemas.py``), uploads (``upload.py``), the served OpenAPI document (``openapi.py``),
  the worker processes (``server.py``) and the service of ``lakemount up`` (``service.py``).

The API shares its HTTP plumbing with the S3 gateway through ``lakemount/serving`` (the framework-free
``Request``/``Response``, the raw ASGI adapter, memory-mapped object bodies, byte ranges, the worker processes)
and imports nothing of the gateway, so an object reads the same through both.  Content rendering for the UI
lives in ``lakemount/render``; the Iceberg catalog it hosts, with the gate it lends it, in ``lakemount/iceberg``.
Like the mount and the gateway, the API is a front end of the catalog and never touches graveler.
"""
