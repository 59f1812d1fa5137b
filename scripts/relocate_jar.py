#!/usr/bin/env python3
"""Relocate Java packages in jars by rewriting class files' constant pools: a tiny maven-shade, stdlib only.

Iceberg's Spark runtime jar, as the PyPI wheel ``snowpark-connect-deps-iceberg`` ships it, lacks the
Jackson classes it was built against under its own package (``org.apache.iceberg.shaded.com.fasterxml.
jackson``): the wheel's makers put a plain Jackson beside it instead.  Plain Jackson jars (PyPI
``snowpark-connect-deps-2``) relocated into that package fill the gap:

    scripts/relocate_jar.py OUT.jar IN.jar... --move com.fasterxml.jackson=org.apache.iceberg.shaded.com.fasterxml.jackson

Every name a class file holds (its own, the classes it uses, field and method descriptors, signatures,
and string constants such as ``Class.forName`` arguments) is a CONSTANT_Utf8 entry of its constant
pool, so rewriting those entries relocates the class; nothing else in the file refers to a name except
through a constant-pool index, and rewriting an entry in place keeps every index.  Entries hold
*modified* UTF-8, but the names moved are ASCII and no byte of a multi-byte sequence is below 0x80,
so replacing bytes is exact.  Entry paths, ``META-INF/services`` file names and their contents move
too; ``module-info.class`` (which would name the old module) and the jars' manifests are left out.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import struct
import sys
import zipfile
from typing import Final

MAGIC: Final = 0xCAFEBABE
UTF8: Final = 1
# Constant-pool entries other than Utf8: tag -> size in bytes after the tag.
FIXED: Final = {
    3: 4, 4: 4,  # Integer, Float
    5: 8, 6: 8,  # Long, Double: they take two slots of the pool
    7: 2, 8: 2, 16: 2, 19: 2, 20: 2,  # Class, String, MethodType, Module, Package
    9: 4, 10: 4, 11: 4, 12: 4, 17: 4, 18: 4,  # Field/Method/InterfaceMethod refs, NameAndType, (Invoke)Dynamic
    15: 3,  # MethodHandle
}
WIDE: Final = (5, 6)
MAX_UTF8: Final = 0xFFFF


class RelocationError(Exception):
    """A class file that cannot be relocated (malformed, or a name that grows past 65535 bytes)."""


Moves = list[tuple[bytes, bytes]]


def _replace(data: bytes, moves: Moves) -> bytes:
    for old, new in moves:
        data = data.replace(old, new)
    return data


def relocate_class(data: bytes, moves: Moves) -> bytes:
    """``data`` (a class file) with ``moves`` ((old, new) byte strings) applied to every Utf8 constant."""
    if len(data) < 10 or struct.unpack_from(">I", data)[0] != MAGIC:
        raise RelocationError("not a class file")
    count = struct.unpack_from(">H", data, 8)[0]
    out = bytearray(data[:10])
    pos, index = 10, 1
    try:
        while index < count:
            tag = data[pos]
            if tag == UTF8:
                length = struct.unpack_from(">H", data, pos + 1)[0]
                text = data[pos + 3:pos + 3 + length]
                if len(text) != length:
                    raise RelocationError("truncated constant pool")
                text = _replace(text, moves)
                if len(text) > MAX_UTF8:
                    raise RelocationError("a relocated constant is longer than 65535 bytes")
                out += bytes((UTF8,)) + struct.pack(">H", len(text)) + text
                pos += 3 + length
                index += 1
            elif tag in FIXED:
                out += data[pos:pos + 1 + FIXED[tag]]
                pos += 1 + FIXED[tag]
                index += 2 if tag in WIDE else 1
            else:
                raise RelocationError(f"unknown constant-pool tag {tag} at entry {index}")
    except (IndexError, struct.error):
        raise RelocationError("truncated constant pool") from None
    if pos > len(data):
        raise RelocationError("truncated constant pool")
    out += data[pos:]
    return bytes(out)


def _kept(name: str, only: list[str]) -> bool:
    """Whether an entry lies in one of the dotted packages ``only`` (all entries if ``only`` is empty)."""
    if not only:
        return True
    if name.startswith("META-INF/versions/"):
        name = name.split("/", 3)[-1]
    if name.startswith("META-INF/services/"):
        return name[len("META-INF/services/"):].startswith(tuple(p + "." for p in only))
    return name.startswith(tuple(p.replace(".", "/") + "/" for p in only))


def relocate_jars(out_path: str, in_paths: list[str], packages: list[tuple[str, str]], only: list[str] | None = None) -> int:
    """Write ``out_path`` with the entries of ``in_paths`` relocated; the number of classes written.

    ``packages`` are (old, new) dotted package names.  ``only`` (dotted packages) keeps just the
    entries in them: e.g. one library out of an application jar that bundles it relocated, whose
    references to other bundled libraries are moved back to their own names.  The first jar
    holding an entry wins (the Jackson jars share only their LICENSE and NOTICE files).
    """
    slashed = [(o.replace(".", "/").encode() + b"/", n.replace(".", "/").encode() + b"/") for o, n in packages]
    dotted = [(o.encode() + b".", n.encode() + b".") for o, n in packages]
    moves = slashed + dotted
    prefixes = tuple(o.decode() for o, _ in slashed)
    seen: set[str] = set()
    classes = 0
    with zipfile.ZipFile(out_path, "w", zipfile.ZIP_DEFLATED) as out:
        out.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nMulti-Release: true\r\nCreated-By: lakemount scripts/relocate_jar.py\r\n\r\n")
        seen.add("META-INF/MANIFEST.MF")
        for path in in_paths:
            with zipfile.ZipFile(path) as jar:
                for info in jar.infolist():
                    name = info.filename
                    if info.is_dir() or name.upper() == "META-INF/MANIFEST.MF" or name.endswith("module-info.class"):
                        continue
                    if not _kept(name, only or []):
                        continue
                    data = jar.read(info)
                    if name.endswith(".class"):
                        try:
                            data = relocate_class(data, moves)
                        except RelocationError as e:
                            raise RelocationError(f"{path}!{name}: {e}") from None
                        classes += 1
                    elif name.startswith("META-INF/services/"):
                        data = _replace(data, dotted)
                    # class files and services anywhere; other resources (version.properties) in a moved package
                    moved = name.endswith(".class") or name.startswith(("META-INF/services/", *prefixes))
                    new_name = _replace(name.encode(), moves).decode() if moved else name
                    if new_name in seen:
                        continue
                    seen.add(new_name)
                    out.writestr(zipfile.ZipInfo(new_name, date_time=info.date_time), data, zipfile.ZIP_DEFLATED)
    return classes


def main(argv: list[str] | None = None) -> int:
    """Relocate the jars the command line names into one; the exit status (1 with a one-line reason on failure)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", help="the jar to write")
    parser.add_argument("jars", nargs="+", help="jars whose entries it holds, relocated")
    parser.add_argument("--move", action="append", required=True, metavar="OLD=NEW",
                        help="a dotted package and where it moves (repeatable)")
    parser.add_argument("--only", action="append", default=[], metavar="PACKAGE",
                        help="keep only the entries of this dotted package (repeatable; default: all)")
    args = parser.parse_args(argv)
    packages = []
    for m in args.move:
        old, sep, new = m.partition("=")
        if not sep or not old or not new:
            parser.error(f"--move {m!r}: use OLD.PACKAGE=NEW.PACKAGE")
        packages.append((old, new))
    tmp = args.out + ".part"
    try:
        classes = relocate_jars(tmp, args.jars, packages, args.only)
    except (RelocationError, OSError, zipfile.BadZipFile) as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        print(f"relocate_jar: {e}", file=sys.stderr)
        return 1
    os.replace(tmp, args.out)
    print(f"relocate_jar: {classes} classes into {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
