"""Which names repositories, branches and tags may have: the one rule, checked by the catalog before anything runs.

The rules are lakeFS's (``pkg/validator``), read as Go reads them: ``\\w`` is
an ASCII word character, so ``ünïcode`` is refused as lakeFS refuses it (Python's
``\\w`` would take any letter), and a pattern must match the whole name (Python's
``$`` also matches before a final newline).  Each kind has a length limit:

- repository: lakeFS's ``^[a-z0-9][a-z0-9-]{2,62}$`` (3 to 63 characters, an S3
  bucket name's limit: a repository is a bucket of the gateway);
- branch: lakeFS's ``^\\w[-\\w]*$``, at most 255 characters (a branch is a
  directory of the mount, and a file name has at most 255 bytes);
- tag: ASCII letters, digits, ``_``, ``-`` and ``.``, not starting with ``-`` or
  ``.``, without ``..`` and not ending in ``.`` (lakeFS's git-like tag rule without
  ``/``, ``~`` and the other characters a directory name or a ref expression
  cannot carry), at most 255 characters for the same reason.

A refused name raises ``InvalidName`` whose one-line message states the rule and
the limit, whatever was wrong (a user who typed 300 characters reads the limit,
one who typed ``ü`` reads which characters are taken).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from lakemount.errors import InvalidName

NAME_MAX: Final = 255  # a branch or tag is a directory of the mount
REPOSITORY_MAX: Final = 63
SHOWN: Final = 60  # characters of a refused name repeated in the message


@dataclass(frozen=True, slots=True)
class NameRule:
    """What names of one kind may be: ``pattern`` (the whole name, ASCII), ``minimum`` to ``limit`` characters."""

    kind: str
    pattern: re.Pattern[str]
    minimum: int
    limit: int
    rule: str  # the rule in words, with the limits

    def problem(self, name: str) -> str | None:
        """Why ``name`` is refused (the rule in words), or None when it is a valid name."""
        if not self.minimum <= len(name) <= self.limit or self.pattern.fullmatch(name) is None:
            return self.rule
        return None

    def check(self, name: str) -> str:
        """``name`` if valid, else raises ``InvalidName`` naming the rule and the limit."""
        problem = self.problem(name)
        if problem is not None:
            raise InvalidName(self.kind, _shown(name), problem)
        return name


def _shown(name: str) -> str:
    """A refused name as the message repeats it: cut after ``SHOWN`` characters, with its length."""
    return name if len(name) <= SHOWN else f"{name[:SHOWN]}… ({len(name)} characters)"


REPOSITORY: Final = NameRule(
    "repository", re.compile(r"[a-z0-9][a-z0-9-]*", re.ASCII), 3, REPOSITORY_MAX,
    f"use 3 to {REPOSITORY_MAX} characters of a-z, 0-9 and '-', starting with a letter or digit "
    "(lakeFS's rule ^[a-z0-9][a-z0-9-]{2,62}$)",
)
BRANCH: Final = NameRule(
    "branch", re.compile(r"\w[-\w]*", re.ASCII), 1, NAME_MAX,
    f"use 1 to {NAME_MAX} ASCII letters, digits, '_' and '-', not starting with '-' (lakeFS's rule ^\\w[-\\w]*$)",
)
TAG: Final = NameRule(
    "tag", re.compile(r"\w(?:[-\w]|\.(?!\.|$))*", re.ASCII), 1, NAME_MAX,  # a '.' followed by neither '.' nor the end
    f"use 1 to {NAME_MAX} ASCII letters, digits, '_', '-' and '.', not starting with '-' or '.', "
    "without '..' and not ending in '.'",
)


def check_repository(name: str) -> str:
    """``name`` if it is a valid repository name, else raises ``InvalidName``."""
    return REPOSITORY.check(name)


def check_branch(name: str) -> str:
    """``name`` if it is a valid branch name, else raises ``InvalidName``."""
    return BRANCH.check(name)


def check_tag(name: str) -> str:
    """``name`` if it is a valid tag name, else raises ``InvalidName``."""
    return TAG.check(name)


def is_repository_name(name: str) -> bool:
    """True when ``name`` may name a repository (the gateway derives one from a bucket name otherwise)."""
    return REPOSITORY.problem(name) is None
