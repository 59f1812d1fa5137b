"""A request body that stalls, as both front ends' tests feed it to their handlers."""

from __future__ import annotations

from lakemount.serving.http import BodyTimeout


class StalledBody:
    """One piece of an upload, then silence until the server gives up (as the ASGI adapter reports it)."""

    def __init__(self) -> None:
        self.reads = 0

    def read(self) -> bytes:
        self.reads += 1
        if self.reads == 1:
            return b"x" * 1024
        raise BodyTimeout("no request body received for 0.1 s")
