"""The documents name tests as evidence: every test they name must exist.

docs/SEMANTICS.md backs each claim with a test (a function ``test_*`` or a module
``test_*.py``); a renamed or deleted test must not leave a claim without evidence.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ["docs/SEMANTICS.md", "docs/GC.md", "docs/CONFIGURATION.md", "docs/API.md", "README.md"]
NAME = re.compile(r"\btest_[A-Za-z0-9_]+\b")


def _defined_tests() -> tuple[set[str], set[str]]:
    functions: set[str] = set()
    modules: set[str] = set()
    for path in (ROOT / "tests").rglob("*.py"):
        modules.add(path.stem)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                functions.add(node.name)
    return functions, modules


def named_tests(text: str) -> set[str]:
    """The test names a document cites (``test_x``, ``test_x.py``, ``tests/a/test_x.py::test_y``)."""
    return set(NAME.findall(text))


@pytest.mark.parametrize("doc", [d for d in DOCS if (ROOT / d).exists()])
def test_every_test_a_document_names_exists(doc: str) -> None:
    functions, modules = _defined_tests()
    missing = sorted(n for n in named_tests((ROOT / doc).read_text()) if n not in functions and n not in modules)
    assert not missing, f"{doc} names tests that do not exist: {missing}"


def test_the_check_sees_a_missing_name() -> None:
    functions, modules = _defined_tests()
    cited = named_tests("see `test_no_such_claim_checker_xyz` and tests/fuse/test_mount.py::test_mount_behaves_like_a_local_directory")
    assert cited == {"test_no_such_claim_checker_xyz", "test_mount", "test_mount_behaves_like_a_local_directory"}
    assert "test_no_such_claim_checker_xyz" not in functions | modules
    assert {"test_mount", "test_mount_behaves_like_a_local_directory"} <= functions | modules
