"""scripts/relocate_jar.py: class files' constant-pool names rewritten in place, every other byte kept.

A hand-built class file exercises the pool's layout (a Long takes two slots, so
an entry after it is found only if that is honoured); a real Jackson jar (the
one pyspark ships in the project's venv) is relocated whole and every class in
it parsed again.  That the JVM loads the result is the Iceberg Spark test's
part (``tests/iceberg/test_spark.py``).
"""

from __future__ import annotations

import importlib.util
import pathlib
import struct
import sys
import zipfile
from types import ModuleType

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("relocate_jar", ROOT / "scripts" / "relocate_jar.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["relocate_jar"] = mod
    spec.loader.exec_module(mod)
    return mod


tool = _tool()
MOVES = [(b"com/fasterxml/jackson/", b"shaded/com/fasterxml/jackson/"), (b"com.fasterxml.jackson.", b"shaded.com.fasterxml.jackson.")]


def utf8(text: bytes) -> bytes:
    return b"\x01" + struct.pack(">H", len(text)) + text


def class_file(*entries: bytes, slots: int, tail: bytes = b"\x00\x21REST-OF-CLASS") -> bytes:
    return struct.pack(">IHHH", 0xCAFEBABE, 0, 61, slots + 1) + b"".join(entries) + tail


def utf8_constants(data: bytes) -> list[bytes]:
    """The Utf8 constants of a class file, parsed independently of the tool."""
    count = struct.unpack_from(">H", data, 8)[0]
    pos, index, out = 10, 1, []
    sizes = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 16: 2, 19: 2, 20: 2, 9: 4, 10: 4, 11: 4, 12: 4, 17: 4, 18: 4, 15: 3}
    while index < count:
        tag = data[pos]
        if tag == 1:
            n = struct.unpack_from(">H", data, pos + 1)[0]
            out.append(data[pos + 3:pos + 3 + n])
            pos += 3 + n
            index += 1
        else:
            pos += 1 + sizes[tag]
            index += 2 if tag in (5, 6) else 1
    return out


def test_names_descriptors_and_strings_move_after_a_long_that_takes_two_slots() -> None:
    data = class_file(
        utf8(b"com/fasterxml/jackson/core/JsonFactory"),  # 1
        b"\x07\x00\x01",  # 2: Class #1
        b"\x05" + struct.pack(">q", 0x0101_0101_0101_0101),  # 3-4: a Long whose bytes look like Utf8 tags
        utf8(b"(Lcom/fasterxml/jackson/core/JsonParser;)V"),  # 5
        b"\x08\x00\x07",  # 6: String #7
        utf8("com.fasterxml.jackson.databind.ObjectMapper \u00e9".encode()),  # 7: non-ASCII kept as it is
        utf8(b"java/lang/Object"),  # 8
        slots=8,
    )
    out = tool.relocate_class(data, MOVES)
    assert utf8_constants(out) == [
        b"shaded/com/fasterxml/jackson/core/JsonFactory",
        b"(Lshaded/com/fasterxml/jackson/core/JsonParser;)V",
        "shaded.com.fasterxml.jackson.databind.ObjectMapper \u00e9".encode(),
        b"java/lang/Object",
    ]
    assert out.endswith(b"\x00\x21REST-OF-CLASS") and len(out) == len(data) + 3 * len(b"shaded/")
    assert b"\x05" + struct.pack(">q", 0x0101_0101_0101_0101) in out


def test_malformed_class_files_are_refused() -> None:
    with pytest.raises(tool.RelocationError, match="not a class file"):
        tool.relocate_class(b"PK\x03\x04 a zip, not a class", MOVES)
    with pytest.raises(tool.RelocationError, match="unknown constant-pool tag 99"):
        tool.relocate_class(class_file(b"\x63\x00", slots=1), MOVES)
    with pytest.raises(tool.RelocationError, match="truncated"):
        tool.relocate_class(class_file(utf8(b"abc")[:-1], slots=1, tail=b""), MOVES)
    with pytest.raises(tool.RelocationError, match="longer than 65535"):
        tool.relocate_class(class_file(utf8(b"com/fasterxml/jackson/" * 2900), slots=1), MOVES)


def test_a_real_jackson_jar_moves_whole(tmp_path: pathlib.Path) -> None:
    jars = sorted((ROOT / ".venv").glob("lib/python3*/site-packages/pyspark/jars/jackson-core-2.*.jar"))
    if not jars:
        pytest.skip("no jackson-core jar in the venv's pyspark")
    out = tmp_path / "moved.jar"
    assert tool.main([str(out), str(jars[0]), "--move", "com.fasterxml.jackson=shaded.com.fasterxml.jackson"]) == 0
    with zipfile.ZipFile(jars[0]) as src, zipfile.ZipFile(out) as moved:
        old_classes = [n for n in src.namelist() if n.endswith(".class") and not n.endswith("module-info.class")]
        names = moved.namelist()
        assert len([n for n in names if n.endswith(".class")]) == len(old_classes) > 100
        assert all("com/fasterxml/jackson/" not in n or "shaded/com/fasterxml/jackson/" in n for n in names)
        assert "META-INF/services/shaded.com.fasterxml.jackson.core.JsonFactory" in names
        assert moved.read("META-INF/services/shaded.com.fasterxml.jackson.core.JsonFactory").strip().startswith(b"shaded.")
        for name in names:
            if name.endswith(".class"):
                for text in utf8_constants(moved.read(name)):
                    stray = text.replace(b"shaded/com/fasterxml/jackson/", b"").replace(b"shaded.com.fasterxml.jackson.", b"")
                    assert b"com/fasterxml/jackson/" not in stray and b"com.fasterxml.jackson." not in stray, (name, text)


def test_only_keeps_one_bundled_library_and_moves_its_references_back(tmp_path: pathlib.Path) -> None:
    app = tmp_path / "app.jar"
    with zipfile.ZipFile(app, "w") as z:
        z.writestr("app/lib/hc/Client.class", class_file(utf8(b"app/lib/hc/Client"), utf8(b"app/lib/log/Logger"), slots=2))
        z.writestr("app/lib/hc/version.properties", b"release=5")
        z.writestr("app/lib/log/Logger.class", class_file(utf8(b"app/lib/log/Logger"), slots=1))
        z.writestr("app/Main.class", class_file(utf8(b"app/Main"), slots=1))
    out = tmp_path / "hc.jar"
    assert tool.main([str(out), str(app), "--only", "app.lib.hc", "--move", "app.lib.hc=x.hc", "--move", "app.lib.log=log"]) == 0
    with zipfile.ZipFile(out) as z:
        assert sorted(z.namelist()) == ["META-INF/MANIFEST.MF", "x/hc/Client.class", "x/hc/version.properties"]
        assert utf8_constants(z.read("x/hc/Client.class")) == [b"x/hc/Client", b"log/Logger"]
