"""Request signatures and body verification for the S3 gateway, one module per concept.

Authentication happens in two steps, so that it can sit under any HTTP framework:

1. ``auth.authenticate`` checks the signature of the request line and headers
   -- SigV4 (``v4.py``: ``Authorization`` header or presigned query) or SigV2
   (``v2.py``) -- over the request model of ``request.py``, the canonical forms
   of ``canonical.py`` and the clock of ``clock.py``, and returns an
   ``AuthResult`` (``result.py``) whose ``BodyPlan`` (``payload.py``) says how
   the body is framed and what it must match.
2. ``AuthResult.body_decoder()`` returns a push-style ``BodyDecoder``
   (``chunked.py``): feed it the raw body as it arrives, write out the payload
   bytes it returns, and call ``finish()`` at the end.  It undoes
   ``aws-chunked`` framing, verifies every chunk signature before releasing
   the chunk's bytes, and checks the payload against ``x-amz-content-sha256``,
   ``Content-MD5`` and the ``x-amz-checksum-*`` headers or trailers
   (``checksums.py``), raising ``S3Error`` on the first mismatch.

Imports point one way: request, clock, checksums <- payload <- chunked <-
result <- v2, v4 <- auth.
"""
