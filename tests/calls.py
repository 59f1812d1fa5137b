"""Counting the calls a piece of code makes (``sys.setprofile``): a cost test's measure that does not
depend on what else the shared machine runs, unlike a timing."""

from __future__ import annotations

import gc
import os
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any


def calls_made(fn: Callable[[], Any], *, c_calls: bool = True) -> Counter[str]:
    """The functions ``fn``'s Python code calls, Python and C alike (a C function called by C is not seen): Python ones
    as ``file:function`` (a generator's every resumption too), C ones as ``c:name`` (without ``c_calls``, only the
    Python ones)."""
    calls: Counter[str] = Counter()

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            calls[f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_code.co_name}"] += 1
        elif event == "c_call" and c_calls:
            calls[f"c:{arg.__name__}"] += 1

    gc.disable()  # a collection would run the gc callbacks some library registered: not the measured code's calls
    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
        gc.enable()
    return calls


def python_calls(fn: Callable[[], Any]) -> int:
    """How many calls ``fn``'s Python code makes, Python functions and C ones alike."""
    return sum(calls_made(fn).values())
