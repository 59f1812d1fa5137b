"""A model-based test of POSIX behaviour: the same random operations on lakemount and on a local directory.

``FsModel`` is a hypothesis state machine.  Each rule applies one operation
(create/overwrite, write at an offset, append, truncate, unlink, mkdir, rmdir,
rename of files and directories, symlink, hard link, chmod) to a *subject* — the core
through ``PathFS``, or a real mount through ``os`` — and to a *reference*, a
plain directory on local disk, and checks that both succeed or both fail with
the same errno.  After every step the two trees must be identical: the same
paths, types, permission bits, sizes, contents and symlink targets, link
counts, and which paths are names of one inode (hard links).

Paths come from a tiny namespace (``a``, ``b``, ``c`` up to three levels), so
collisions — existing targets, non-empty directories, files where a directory
is expected — happen often.  Symlink targets never name a path of that
namespace, and no operation goes through a symlink (``os`` would follow it,
the core by design does not see the target), so both sides mean the same thing.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tests.fuse.pathfs import PathFS

T = TypeVar("T")

NAMES = ("a", "b", "c")
MODES = (0o755, 0o750, 0o700, 0o644, 0o640, 0o600)
TARGETS = ("t1", "../t2", "/abs/t3", "x/y/z")

# Mostly shallow paths, so that operations usually find what they name.
paths = st.sampled_from((1, 1, 1, 2, 2, 3)).flatmap(lambda n: st.lists(st.sampled_from(NAMES), min_size=n, max_size=n)).map("/".join)
data = st.binary(max_size=40)
offsets = st.integers(min_value=0, max_value=48)


@dataclass(frozen=True)
class Node:
    kind: str  # "file", "dir", "link"
    perm: int
    size: int
    content: bytes | str  # file bytes or link target
    links: int = 1  # st_nlink: a directory's 2 + subdirectories (read after listing it), a file's names
    names: tuple[str, ...] = ()  # every path of the tree with this one's inode (hard links), itself included


class Driver(Protocol):
    """What the model needs from either side; paths are relative ("a/b")."""

    def write_file(self, path: str, data: bytes, mode: int) -> None: ...
    def write_at(self, path: str, offset: int, data: bytes) -> None: ...
    def append(self, path: str, data: bytes) -> None: ...
    def truncate(self, path: str, size: int) -> None: ...
    def unlink(self, path: str) -> None: ...
    def mkdir(self, path: str, mode: int) -> None: ...
    def rmdir(self, path: str) -> None: ...
    def rename(self, src: str, dst: str) -> None: ...
    def symlink(self, target: str, path: str) -> None: ...
    def link(self, src: str, dst: str) -> None: ...
    def chmod(self, path: str, mode: int) -> None: ...
    def tree(self) -> dict[str, Node]: ...


class OsDriver:
    """The operations on a real directory with ``os`` (a local disk, or a lakemount mount)."""

    def __init__(self, root: str, hide: frozenset[str] = frozenset()) -> None:
        self.root = root
        self.hide = hide

    def _p(self, path: str) -> str:
        return os.path.join(self.root, path)

    def write_file(self, path: str, data: bytes, mode: int) -> None:
        p = self._p(path)
        existed = os.path.lexists(p)
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            if not existed:
                os.fchmod(fd, mode)  # the process umask must not matter
            os.write(fd, data)
        finally:
            os.close(fd)

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        fd = os.open(self._p(path), os.O_RDWR)
        try:
            os.pwrite(fd, data, offset)
        finally:
            os.close(fd)

    def append(self, path: str, data: bytes) -> None:
        fd = os.open(self._p(path), os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)

    def truncate(self, path: str, size: int) -> None:
        os.truncate(self._p(path), size)

    def unlink(self, path: str) -> None:
        os.unlink(self._p(path))

    def mkdir(self, path: str, mode: int) -> None:
        os.mkdir(self._p(path), mode)
        os.chmod(self._p(path), mode)

    def rmdir(self, path: str) -> None:
        os.rmdir(self._p(path))

    def rename(self, src: str, dst: str) -> None:
        os.rename(self._p(src), self._p(dst))

    def symlink(self, target: str, path: str) -> None:
        os.symlink(target, self._p(path))

    def link(self, src: str, dst: str) -> None:
        os.link(self._p(src), self._p(dst), follow_symlinks=False)

    def chmod(self, path: str, mode: int) -> None:
        os.chmod(self._p(path), mode)

    def tree(self) -> dict[str, Node]:
        out: dict[str, Node] = {}
        inodes: dict[str, int] = {}

        def walk(rel: str) -> None:
            for name in sorted(os.listdir(self._p(rel) if rel else self.root)):
                if not rel and name in self.hide:
                    continue
                child = f"{rel}/{name}" if rel else name
                st_ = os.lstat(self._p(child))
                inodes[child] = st_.st_ino
                if stat.S_ISLNK(st_.st_mode):
                    out[child] = Node("link", 0, 0, os.readlink(self._p(child)), st_.st_nlink)
                elif stat.S_ISDIR(st_.st_mode):
                    walk(child)
                    links = os.lstat(self._p(child)).st_nlink
                    out[child] = Node("dir", stat.S_IMODE(st_.st_mode), 0, b"", links)
                else:
                    with open(self._p(child), "rb") as f:
                        content = f.read()
                    assert len(content) == st_.st_size, f"{child}: size {st_.st_size} but {len(content)} bytes read"
                    out[child] = Node("file", stat.S_IMODE(st_.st_mode), st_.st_size, content, st_.st_nlink)

        walk("")
        return with_names(out, inodes)


class CoreDriver:
    """The operations on the kernel-free core, through ``PathFS``, under a branch root."""

    def __init__(self, pfs: PathFS, root: str) -> None:
        self.pfs = pfs
        self.root = root.rstrip("/")

    def _p(self, path: str) -> str:
        return f"{self.root}/{path}"

    def write_file(self, path: str, data: bytes, mode: int) -> None:
        self.pfs.write_file(self._p(path), data, mode)

    def write_at(self, path: str, offset: int, data: bytes) -> None:
        with self.pfs.opened(self._p(path), os.O_RDWR) as fh:
            self.pfs.pwrite(fh, offset, data)

    def append(self, path: str, data: bytes) -> None:
        self.pfs.append(self._p(path), data)

    def truncate(self, path: str, size: int) -> None:
        self.pfs.truncate(self._p(path), size)

    def unlink(self, path: str) -> None:
        self.pfs.unlink(self._p(path))

    def mkdir(self, path: str, mode: int) -> None:
        self.pfs.mkdir(self._p(path), mode)

    def rmdir(self, path: str) -> None:
        self.pfs.rmdir(self._p(path))

    def rename(self, src: str, dst: str) -> None:
        self.pfs.rename(self._p(src), self._p(dst))

    def symlink(self, target: str, path: str) -> None:
        self.pfs.symlink(target, self._p(path))

    def link(self, src: str, dst: str) -> None:
        self.pfs.link(self._p(src), self._p(dst))

    def chmod(self, path: str, mode: int) -> None:
        self.pfs.chmod(self._p(path), mode)

    def tree(self) -> dict[str, Node]:
        out: dict[str, Node] = {}
        inodes: dict[str, int] = {}

        def walk(rel: str) -> None:
            for name in sorted(self.pfs.listdir(self._p(rel) if rel else self.root)):
                if not rel and name == ".lakefs":
                    continue
                child = f"{rel}/{name}" if rel else name
                a = self.pfs.lstat(self._p(child))
                inodes[child] = a.ino
                if stat.S_ISLNK(a.mode):
                    out[child] = Node("link", 0, 0, self.pfs.readlink(self._p(child)), a.nlink)
                elif stat.S_ISDIR(a.mode):
                    walk(child)
                    links = self.pfs.lstat(self._p(child)).nlink
                    out[child] = Node("dir", stat.S_IMODE(a.mode), 0, b"", links)
                else:
                    content = self.pfs.read_file(self._p(child))
                    assert len(content) == a.size, f"{child}: size {a.size} but {len(content)} bytes read"
                    out[child] = Node("file", stat.S_IMODE(a.mode), a.size, content, a.nlink)

        walk("")
        return with_names(out, inodes)


def with_names(tree: dict[str, Node], inodes: dict[str, int]) -> dict[str, Node]:
    """``tree`` with each file's and symlink's ``names``: the paths that share its inode number."""
    by_ino: dict[int, list[str]] = {}
    for path, ino in inodes.items():
        if tree[path].kind != "dir":
            by_ino.setdefault(ino, []).append(path)
    return {path: node if node.kind == "dir" else dataclasses.replace(node, names=tuple(sorted(by_ino[inodes[path]])))
            for path, node in tree.items()}


def outcome(fn: Callable[[], T]) -> tuple[str, object]:
    try:
        return ("ok", fn())
    except OSError as exc:
        return ("errno", errno.errorcode.get(exc.errno or 0, exc.errno))


class FsModel(RuleBasedStateMachine):
    """Subject and reference must agree after every operation."""

    def __init__(self, subject: Driver, reference: OsDriver, on_teardown: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.subject = subject
        self.reference = reference
        self.on_teardown = on_teardown
        self.steps = 0  # operations applied to both sides (rules that passed their assumptions)

    # --- helpers -------------------------------------------------------------
    def _through_symlink(self, path: str, *, final: bool) -> bool:
        """True if ``path`` goes through a symlink (or, with ``final``, is one) on the reference."""
        parts = path.split("/")
        upto = parts if final else parts[:-1]
        for i in range(1, len(upto) + 1):
            if os.path.islink(os.path.join(self.reference.root, *upto[:i])):
                return True
        return False

    def both(self, op: str, *args: object) -> None:
        self.steps += 1
        ref = outcome(lambda: getattr(self.reference, op)(*args))
        sub = outcome(lambda: getattr(self.subject, op)(*args))
        assert ref[0] == sub[0] and (ref[0] == "ok" or ref[1] == sub[1]), f"{op}{args}: reference {ref}, lakemount {sub}"

    # --- rules ---------------------------------------------------------------
    def _existing_or_any(self, data: st.DataObject) -> str:
        """Half the time a path that exists now (on the reference), else any path."""
        existing = sorted(self.reference.tree())
        if existing and data.draw(st.booleans(), label="existing"):
            return data.draw(st.sampled_from(existing), label="path")
        return data.draw(paths, label="path")

    @rule(path=paths, content=data, mode=st.sampled_from(MODES))
    def write_file(self, path: str, content: bytes, mode: int) -> None:
        assume(not self._through_symlink(path, final=True))
        self.both("write_file", path, content, mode)

    @rule(data=st.data(), offset=offsets, content=data)
    def write_at(self, data: st.DataObject, offset: int, content: bytes) -> None:
        path = self._existing_or_any(data)
        assume(not self._through_symlink(path, final=True))
        self.both("write_at", path, offset, content)

    @rule(data=st.data(), content=data)
    def append(self, data: st.DataObject, content: bytes) -> None:
        path = self._existing_or_any(data)
        assume(not self._through_symlink(path, final=True))
        self.both("append", path, content)

    @rule(data=st.data(), size=offsets)
    def truncate(self, data: st.DataObject, size: int) -> None:
        path = self._existing_or_any(data)
        assume(not self._through_symlink(path, final=True))
        self.both("truncate", path, size)

    @rule(data=st.data())
    def unlink(self, data: st.DataObject) -> None:
        path = self._existing_or_any(data)
        assume(not self._through_symlink(path, final=False))
        self.both("unlink", path)

    @rule(path=paths, mode=st.sampled_from(MODES[:3]))
    def mkdir(self, path: str, mode: int) -> None:
        assume(not self._through_symlink(path, final=False))
        self.both("mkdir", path, mode)

    @rule(data=st.data())
    def rmdir(self, data: st.DataObject) -> None:
        path = self._existing_or_any(data)
        assume(not self._through_symlink(path, final=False))
        self.both("rmdir", path)

    @rule(data=st.data(), dst=paths)
    def rename(self, data: st.DataObject, dst: str) -> None:
        src = self._existing_or_any(data)
        assume(not self._through_symlink(src, final=False) and not self._through_symlink(dst, final=False))
        self.both("rename", src, dst)

    @rule(link_target=st.sampled_from(TARGETS), path=paths)
    def symlink(self, link_target: str, path: str) -> None:
        assume(not self._through_symlink(path, final=False))
        self.both("symlink", link_target, path)

    @rule(data=st.data(), dst=paths)
    def link(self, data: st.DataObject, dst: str) -> None:
        src = self._existing_or_any(data)
        assume(not self._through_symlink(src, final=False) and not self._through_symlink(dst, final=False))
        self.both("link", src, dst)

    @rule(data=st.data(), mode=st.sampled_from(MODES))
    def chmod(self, data: st.DataObject, mode: int) -> None:
        path = self._existing_or_any(data)
        assume(not self._through_symlink(path, final=True))
        self.both("chmod", path, mode)

    # --- the comparison ----------------------------------------------------------
    @invariant()
    def trees_agree(self) -> None:
        ref = self.reference.tree()
        sub = self.subject.tree()
        assert sorted(sub) == sorted(ref), f"paths differ: lakemount {sorted(sub)}, reference {sorted(ref)}"
        for path, node in ref.items():
            assert sub[path] == node, f"{path}: lakemount {sub[path]}, reference {node}"

    def teardown(self) -> None:
        if self.on_teardown is not None:
            self.on_teardown()
