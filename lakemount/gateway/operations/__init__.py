"""One module per S3 operation; each exposes ``handle(ctx) -> Response``.

``routing.py`` picks the module for a request; shared pieces live beside this
package (``objects.py`` for object headers, conditions, ranges and bodies,
``listing.py`` for listings, ``multipart.py`` for upload state).
"""
