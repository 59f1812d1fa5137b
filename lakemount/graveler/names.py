"""Validation of repository, branch and tag names (the lakeFS rules)."""

from __future__ import annotations

import re

from lakemount.errors import InvalidName

_REPO = re.compile(r"^[a-z0-9][a-z0-9-]{2,62}$")
_BRANCH = re.compile(r"^\w[-\w]*$")
_TAG = re.compile(r"^[A-Za-z0-9_][-A-Za-z0-9_.]*$")
_HEX = re.compile(r"^[0-9a-f]+$")


def validate_repo(name: str) -> str:
    """``name`` if it is a valid repository name, else raises ``InvalidName``."""
    if not _REPO.match(name):
        raise InvalidName("repository", name, "use 3-63 lowercase letters, digits and '-', starting with a letter or digit")
    return name


def validate_branch(name: str) -> str:
    """``name`` if it is a valid branch name, else raises ``InvalidName``.

    Hex names are valid, as in lakeFS; creating a branch named exactly like an
    existing commit id is refused where the commits are known (``Graveler.create_branch``).
    """
    if not _BRANCH.match(name) or len(name) > 255:
        raise InvalidName("branch", name, "use letters, digits, '_' and '-', not starting with '-'")
    return name


def validate_tag(name: str) -> str:
    """``name`` if it is a valid tag name, else raises ``InvalidName``."""
    if not _TAG.match(name) or len(name) > 255 or ".." in name or name.endswith("."):
        raise InvalidName("tag", name, "use letters, digits, '_', '-' and '.', no '..'")
    return name


def is_hex(s: str) -> bool:
    """True when ``s`` is non-empty lowercase hex (a commit id or a prefix of one)."""
    return bool(_HEX.match(s))
