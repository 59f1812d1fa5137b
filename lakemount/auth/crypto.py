"""Encryption at rest of secret access keys under the server key.

A SigV4/SigV2 verifier needs the plain secret (HMAC, not a password hash), so
secrets are stored encrypted, not hashed.  ``SecretBox`` derives an AES-256-GCM
key from the server key (config ``auth.encrypt.secret_key`` or the key file under
``LAKEMOUNT_HOME``) with HKDF, and binds each ciphertext to its access key id as
associated data: a row copied onto another key id does not decrypt.  Blobs start
with a version byte so the scheme can change without a flag day.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from lakemount.errors import Corrupt, InvalidArgument

_VERSION = 1
_NONCE_BYTES = 12
_HKDF_INFO = b"lakemount auth secret encryption v1"


class UndecryptableSecret(Corrupt):
    """A stored secret does not decrypt: the server key changed, or the row did."""

    def __init__(self, access_key_id: str) -> None:
        super().__init__(
            f"cannot decrypt the secret of access key {access_key_id}: "
            "auth.encrypt.secret_key differs from the key it was stored with, or the row is corrupt"
        )
        self.access_key_id = access_key_id


class SecretBox:
    """Encrypts and decrypts secrets under one server key; thread-safe."""

    __slots__ = ("_aead",)

    def __init__(self, server_key: str | bytes) -> None:
        raw = server_key.encode() if isinstance(server_key, str) else bytes(server_key)
        if not raw:
            raise InvalidArgument("auth.encrypt.secret_key must not be empty")
        # HKDF lets the operator use any passphrase-like string as the server key
        # while AES always gets a uniformly random 256-bit key.
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(raw)
        self._aead = AESGCM(key)

    def __repr__(self) -> str:
        return "SecretBox(<server key hidden>)"

    def encrypt(self, secret: str, access_key_id: str) -> bytes:
        """Encrypt ``secret`` for storage in the row of ``access_key_id``."""
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, secret.encode(), access_key_id.encode())
        return bytes([_VERSION]) + nonce + sealed

    def decrypt(self, blob: bytes, access_key_id: str) -> str:
        """Decrypt a blob made by :meth:`encrypt`; raises ``UndecryptableSecret``."""
        if len(blob) < 1 + _NONCE_BYTES or blob[0] != _VERSION:
            raise UndecryptableSecret(access_key_id)
        nonce, sealed = blob[1 : 1 + _NONCE_BYTES], blob[1 + _NONCE_BYTES :]
        try:
            return self._aead.decrypt(nonce, sealed, access_key_id.encode()).decode()
        except (InvalidTag, UnicodeDecodeError):
            raise UndecryptableSecret(access_key_id) from None


def read_key_file(path: str | os.PathLike[str], *, create: bool = True) -> str:
    """Return the server key stored in ``path``, creating it if asked and absent.

    A created key is 32 random bytes in base64, written with mode 0600 through
    ``O_EXCL`` so two processes starting at once agree on one key.  Raises
    ``InvalidArgument`` for an empty key file and ``FileNotFoundError`` when the
    file is absent and ``create`` is false.
    """
    p = Path(path)
    if create and not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        key = base64.b64encode(secrets.token_bytes(32)).decode()
        tmp = p.with_name(f".{p.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(key + "\n")
                f.flush()
                os.fsync(f.fileno())
            # link() fails if another process won the race; then use its key.
            with contextlib.suppress(FileExistsError):
                os.link(tmp, p)
        finally:
            tmp.unlink(missing_ok=True)
    key = p.read_text().strip()
    if not key:
        raise InvalidArgument(f"server key file {p} is empty")
    return key
