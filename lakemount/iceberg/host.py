"""What the Iceberg catalog needs of the server that hosts it: the gate its requests pass, and the client defaults.

The REST API's server hosts the catalog (``api/handler.py`` hands it every request under ``/iceberg/``) and
lends it its authenticator: :class:`IcebergGate` asks that authenticator (the same keys, tokens and policies as
the lakeFS API) and answers its refusals in the catalog's error shape.  :func:`iceberg_defaults` is what
``/v1/config`` tells every client about the S3 gateway.  Neither imports the API: the authenticator is the
:class:`Authenticating` it is declared to be, and its refusals are ``serving.http.Refused``.
"""

from __future__ import annotations

from typing import Final, Protocol

from lakemount.auth.policies import Action
from lakemount.config import Config
from lakemount.iceberg.errors import IcebergError
from lakemount.serving.http import Refused


class Authenticating(Protocol):
    """What the gate asks of the host's authenticator (``api.auth.Authenticator``); each refuses with ``Refused``."""

    def login(self, access_key_id: str, secret: str, client: str = "") -> tuple[str, int]: ...

    def authenticate(self, authorization: str | None, cookie: str | None, client: str = "") -> str: ...

    def own_key(self, authorization: str | None) -> tuple[str, str]: ...

    def allowed(self, user_id: str, action: Action, repo: str = "*") -> bool: ...

    def require(self, user_id: str, action: Action, repo: str = "*") -> None: ...


class IcebergGate:
    """The authenticator as the Iceberg catalog asks it (``service.Gate``): its refusals in the catalog's shape."""

    TYPES: Final = {401: "NotAuthorizedException", 403: "ForbiddenException", 429: "TooManyRequestsException"}

    def __init__(self, authenticator: Authenticating) -> None:
        self.auth = authenticator

    def _shaped(self, e: Refused) -> IcebergError:
        return IcebergError(e.status, self.TYPES.get(e.status, "BadRequestException"), e.message, e.headers)

    def login(self, access_key_id: str, secret: str, client: str) -> tuple[str, int]:
        try:
            return self.auth.login(access_key_id, secret, client)
        except Refused as e:
            raise self._shaped(e) from None

    def user(self, authorization: str | None, client: str) -> str:
        if not authorization:
            raise IcebergError(401, "NotAuthorizedException",
                               "missing credentials: a bearer token from oauth/tokens, or basic auth with an access key")
        try:
            return self.auth.authenticate(authorization, None, client)
        except Refused as e:
            raise self._shaped(e) from None

    def require(self, user: str, action: Action, repo: str) -> None:
        try:
            self.auth.require(user, action, repo)
        except Refused as e:
            raise self._shaped(e) from None

    def allowed(self, user: str, action: Action, repo: str) -> bool:
        return self.auth.allowed(user, action, repo)

    def own_key(self, authorization: str | None) -> tuple[str, str]:
        try:
            return self.auth.own_key(authorization)
        except Refused as e:
            raise self._shaped(e) from None


def iceberg_defaults(config: Config) -> dict[str, str]:
    """What the catalog's ``config`` tells every client: path-style S3 through the gateway (its address when it is
    fixed: ``lakemount serve`` sets the one it bound), in its region; the caller's own key is added per request."""
    gw = config.gateways.s3
    out = {"s3.path-style-access": "true", "s3.region": gw.region, "client.region": gw.region}
    host, _, port = gw.listen_address.rpartition(":")
    host = host.strip("[]")
    if port.isdigit() and int(port) and host not in ("", "0.0.0.0", "::"):
        scheme = "https" if gw.tls.cert_file else "http"
        out["s3.endpoint"] = f"{scheme}://{'[' + host + ']' if ':' in host else host}:{port}"
    return out
