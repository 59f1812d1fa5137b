"""The errno table: every error the catalog can raise maps to an errno (one table, in ``fuse/errno.py``)."""

from __future__ import annotations

import errno
import inspect

import lakemount.errors as errors_module
from lakemount.errors import CATEGORIES, LakeMountError
from lakemount.fuse.errno import ERRNO_BY_CATEGORY, FsError, errno_of


def test_every_category_has_an_errno() -> None:
    for category in (*CATEGORIES, LakeMountError):
        assert category in ERRNO_BY_CATEGORY


def test_every_error_class_maps() -> None:
    classes = [c for _n, c in inspect.getmembers(errors_module, inspect.isclass) if issubclass(c, LakeMountError)]
    assert len(classes) > 10
    for cls in classes:
        exc = cls.__new__(cls)
        Exception.__init__(exc, "x")
        assert errno_of(exc) in set(ERRNO_BY_CATEGORY.values()), cls


def test_posix_and_unknown_errors() -> None:
    assert errno_of(FsError(errno.ENOTEMPTY)) == errno.ENOTEMPTY
    assert errno_of(OSError(errno.ENOSPC, "disk full")) == errno.ENOSPC
    assert errno_of(ValueError("bug")) is None
    assert errno_of(errors_module.MergeConflict(["a"])) == errno.EBUSY
    assert errno_of(errors_module.ReadOnlyRef("v1")) == errno.EROFS
    assert errno_of(errors_module.RefNotFound("r", "x")) == errno.ENOENT
    assert errno_of(errors_module.Unavailable("down")) == errno.EIO
