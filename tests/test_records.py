"""``@record`` and ``@setting`` (lakemount/records.py) make what ``@dataclass(frozen=True, slots=True)`` makes (issue 41).

Every record and configuration section of the package is held to its generated
twin (``dataclasses.make_dataclass`` on the same fields): the same repr,
equality, hash, ``__match_args__``, slots, frozen fields, pickling, ``replace``
and ``asdict``, and the same ``TypeError`` for a wrong call.  A record's
``__init__`` is compiled on first use: before that the class holds none.
"""

from __future__ import annotations

import dataclasses
import importlib
import pickle
import re
from dataclasses import field
from pathlib import Path

import pytest

from lakemount.records import record, setting

PACKAGE = Path(__file__).resolve().parent.parent / "lakemount"


def _declared() -> list[type]:
    """Every class of the package declared with ``@record`` or ``@setting``."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        if "@record(" not in text and "@setting(" not in text:
            continue
        module = importlib.import_module(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        found += [cls for cls in vars(module).values()
                  if isinstance(cls, type) and cls.__module__ == module.__name__ and "__record_compared__" in vars(cls)]
    return found


def _twin(cls: type) -> type:
    """``cls`` as ``dataclass`` itself generates it: the same fields, generated methods."""
    fields = [(f.name, f.type, field(default=f.default, default_factory=f.default_factory, init=f.init, repr=f.repr,
                                     hash=f.hash, compare=f.compare, kw_only=f.kw_only))
              for f in dataclasses.fields(cls)]
    frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    return dataclasses.make_dataclass(cls.__name__, fields, frozen=frozen, slots="__slots__" in vars(cls))  # type: ignore[arg-type]


DECLARED = _declared()


def test_the_package_declares_its_records_so() -> None:
    names = {f"{cls.__module__}.{cls.__qualname__}" for cls in DECLARED}
    assert {"lakemount.graveler.model.Commit", "lakemount.config.Config", "lakemount.cli.common.Uri"} <= names


@pytest.mark.parametrize("cls", DECLARED, ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_a_record_behaves_as_its_generated_dataclass(cls: type) -> None:
    twin = _twin(cls)
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    frozen = params.frozen
    assert (params.init, params.repr, params.eq, params.order) == (True, True, True, False)
    assert ("__dict__" in dir(cls)) == ("__dict__" in dir(twin)) and getattr(cls, "__slots__", None) == getattr(
        twin, "__slots__", None)
    assert cls.__match_args__ == twin.__match_args__  # type: ignore[attr-defined]
    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = {f.name: f"/{f.name}" for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    ours, theirs = cls(**required), twin(**required)
    shown = repr(theirs).replace(twin.__qualname__, cls.__qualname__, 1)
    if cls.__name__ in ("_Group", "_Lane"):  # their Event and Condition, made per instance, show their addresses
        assert re.sub(" at 0x[0-9a-f]+", "", repr(ours)) == re.sub(" at 0x[0-9a-f]+", "", shown)
    else:
        assert repr(ours) == shown
    if frozen:
        assert hash(ours) == hash(theirs)
    else:
        assert cls.__hash__ is twin.__hash__ is None  # type: ignore[comparison-overlap]
    assert ours != theirs  # another class: not equal, as generated
    values = [getattr(ours, f.name) for f in fields]
    assert cls(*values) == ours
    if frozen or cls.__name__ not in ("_Group", "_Lane"):  # locks and events do not pickle
        assert pickle.loads(pickle.dumps(ours)) == ours
        assert dataclasses.asdict(ours) == dataclasses.asdict(theirs)
    if fields:
        last = fields[-1].name
        changed = dataclasses.replace(ours, **{last: "other"})
        assert getattr(changed, last) == "other"
        assert (changed == ours) == (not fields[-1].compare)
        if frozen:
            with pytest.raises(dataclasses.FrozenInstanceError):
                setattr(ours, fields[0].name, "x")
            with pytest.raises(dataclasses.FrozenInstanceError):
                delattr(ours, fields[0].name)
        else:
            setattr(ours, fields[0].name, "x")
            assert getattr(ours, fields[0].name) == "x"
        wrong: list[tuple[tuple[object, ...], dict[str, object]]] = [
            ((*values, 1), {}), ((), {"nope": 1}), ((values[0],), {fields[0].name: values[0]})]
        if required:
            wrong.append(((), {}))
        for args, kwargs in wrong:
            with pytest.raises(TypeError) as generated:
                twin(*args, **kwargs)
            message = str(generated.value).replace(twin.__qualname__, cls.__qualname__, 1)
            with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
                cls(*args, **kwargs)


def test_a_records_init_is_compiled_on_first_use_and_kept() -> None:
    @record(frozen=True, slots=True)
    class Point:
        """A point."""

        x: int
        y: int = 0
        tags: tuple[str, ...] = field(default_factory=tuple)

    stub = Point.__dict__["__init__"]
    assert stub.__code__.co_filename == __import__("lakemount.records").records.__file__
    assert Point(1) == Point(1, 0, ()) and Point(1).tags == ()
    compiled = Point.__dict__["__init__"]
    assert compiled is not stub and compiled.__code__.co_filename.startswith("<record ")
    assert Point(2, y=3).y == 3 and Point.__dict__["__init__"] is compiled


def test_a_post_init_runs_and_a_subclass_inherits_the_fields() -> None:
    seen = []

    @record(frozen=True, slots=True)
    class Checked:
        """Checks itself."""

        name: str

        def __post_init__(self) -> None:
            seen.append(self.name)

    assert Checked("a").name == "a" and seen == ["a"]

    @setting(frozen=True, slots=True)
    class Section:
        """A section."""

        level: str = "INFO"

    assert Section() == Section("INFO") != Section("DEBUG")


def test_what_a_record_refuses() -> None:
    with pytest.raises(TypeError, match=r"a record is record\(frozen=True, slots=True\), record\(slots=True\) or record\(\)"):
        record(frozen=True)
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):
        @record(frozen=True, slots=True)
        class Bad:
            """Out of order."""

            a: int = 0
            b: int  # type: ignore[misc]
    with pytest.raises(TypeError, match="cannot overwrite"):
        @record(frozen=True, slots=True)
        class Mutable:
            """Not frozen."""

            a: int

            def __setattr__(self, name: str, value: object) -> None:
                object.__setattr__(self, name, value)
    with pytest.raises(TypeError, match="needs a docstring"):
        @record(frozen=True, slots=True)
        class Undocumented:
            a: int
