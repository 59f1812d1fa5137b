"""Module loggers that load :mod:`logging` when they first log.

``log = get_logger(__name__)`` stands where ``logging.getLogger(__name__)`` would:
the same logger, made on the first call of any of its methods.  Importing
``logging`` (with ``traceback``, ``string``, ``textwrap``) is a few milliseconds
of every process's start; a CLI verb that logs nothing need not pay them
(issue 41, ``tests/cli/test_import_budget.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    import logging


class _Deferred:
    """A stand-in for ``logging.getLogger(name)`` that makes the logger on first use and forwards to it."""

    __slots__ = ("_logger", "_name")

    def __init__(self, name: str) -> None:
        self._name = name
        self._logger: logging.Logger | None = None

    def __getattr__(self, attribute: str) -> Any:
        logger = self._logger
        if logger is None:
            import logging

            logger = self._logger = logging.getLogger(self._name)
        return getattr(logger, attribute)

    def __repr__(self) -> str:
        return f"<deferred logger {self._name}>"


def get_logger(name: str) -> logging.Logger:
    """The logger ``name`` (as ``logging.getLogger``), made and ``logging`` imported when it is first used."""
    return cast("logging.Logger", _Deferred(name))
