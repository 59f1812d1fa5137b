"""Records that cost no compile to declare: ``@record(frozen=True, slots=True)`` (and mutable ``@record()``).

A dataclass generates its ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``,
``__setattr__`` and ``__delattr__`` as source text and compiles each, per class,
when its module is imported: six compiles a record, which every start of every
process pays, a CLI verb's included (issue 41: ~4 M instructions a record, and a
data verb's start declares some fifty records and configuration sections).  So
the records on a CLI verb's path are declared with :func:`record` instead: the same frozen,
slotted dataclass (``dataclasses.fields``, ``replace``, ``asdict``,
``is_dataclass``, ``FrozenInstanceError``, pickling, ``__match_args__``, and the
``__dataclass_params__`` of a frozen one), whose repr, equality, hash and
frozen attributes are shared functions here that do what the generated ones do,
and whose ``__init__`` is generated and compiled the first time the class is
instantiated: a record a process never makes costs no compile at all.
:func:`setting` is the same with a shared ``__init__`` too, for classes that are
all made once at start (the configuration's sections), where compiling even
the ``__init__`` would cost more than it saves.  ``@record()`` and
``@record(slots=True)`` make a mutable dataclass so (the shared repr and
equality, unhashable as dataclass makes it).  Each needs a docstring: without
one, dataclass writes one from ``inspect.signature``, which compiles tokenize's
patterns (~14 M instructions).

The type checker sees ``dataclasses.dataclass`` itself (both names are it under
``TYPE_CHECKING``), so constructor calls stay checked.  tests/test_records.py
holds every record and section of the package to its generated twin.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable
from dataclasses import MISSING, FrozenInstanceError
from typing import TYPE_CHECKING, Any, TypeVar

__all__ = ["record", "setting"]

_C = TypeVar("_C", bound=type)


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """The tuple of those fields of a record, as the generated methods build it (``attrgetter``: in C, no frame)."""
    if len(names) >= 2:
        return operator.attrgetter(*names)
    if names:
        one = operator.attrgetter(names[0])
        return lambda self: (one(self),)
    return lambda self: ()


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self).__record_shown__)
    return f"{type(self).__qualname__}({shown})"


def _eq_of(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any, object], bool]:
    """A class's ``__eq__`` over the fields ``key`` gets: a closure, so making one compiles nothing."""

    def __eq__(self: Any, other: object) -> bool:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _hash_of(key: Callable[[Any], tuple[Any, ...]]) -> Callable[[Any], int]:
    """A class's ``__hash__`` over the fields ``key`` gets."""

    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__


def _setattr(self: Any, name: str, value: object) -> None:
    raise FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r}")


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(dataclasses.fields(self), state, strict=True):
        object.__setattr__(self, f.name, value)


def _shared_init(self: Any, *args: Any, **kwargs: Any) -> None:
    """The generated ``__init__``, interpreted: fields in order, positionally or by name; defaults, fresh factories."""
    fields = [f for f in type(self).__dataclass_fields__.values() if f.init]
    name = type(self).__qualname__
    if len(args) > len(fields):
        most = len(fields) + 1  # with self, as Python counts them
        least = 1 + sum(f.default is MISSING and f.default_factory is MISSING for f in fields)
        takes = f"{most}" if least == most else f"from {least} to {most}"
        raise TypeError(f"{name}.__init__() takes {takes} positional arguments but {len(args) + 1} were given")
    values = {f.name: arg for f, arg in zip(fields, args, strict=False)}
    for key, value in kwargs.items():
        if not any(f.name == key for f in fields):
            raise TypeError(f"{name}.__init__() got an unexpected keyword argument {key!r}")
        if key in values:
            raise TypeError(f"{name}.__init__() got multiple values for argument {key!r}")
        values[key] = value
    for f in type(self).__dataclass_fields__.values():
        if f.name in values:
            value = values[f.name]
        elif f.default is not MISSING:
            value = f.default
        elif f.default_factory is not MISSING:
            value = f.default_factory()
        elif f.init:
            raise TypeError(f"{name}.__init__() missing 1 required positional argument: {f.name!r}")
        else:
            continue
        object.__setattr__(self, f.name, value)


def _generated_init(cls: type) -> Callable[..., None]:
    """The ``__init__`` dataclass would generate for frozen ``cls``, compiled now (the first instantiation)."""
    names: dict[str, Any] = {"__record_set__": object.__setattr__, "__record_factory__": _HAS_FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cls):
        value = f.name
        if f.default is not MISSING:
            names[f"__record_default_{f.name}__"] = f.default
            default = f"=__record_default_{f.name}__"
        elif f.default_factory is not MISSING:
            names[f"__record_new_{f.name}__"] = f.default_factory
            default = "=__record_factory__"
            value = f"__record_new_{f.name}__() if {f.name} is __record_factory__ else {f.name}"
        else:
            default = ""
        if f.init:
            (keyword if f.kw_only else positional).append(f"{f.name}{default}")
        elif f.default is not MISSING:
            value = f"__record_default_{f.name}__"
        elif f.default_factory is not MISSING:
            value = f"__record_new_{f.name}__()"
        else:
            continue
        body.append(f"    __record_set__(self, {f.name!r}, {value})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({params}) -> None:\n" + ("\n".join(body) or "    pass") + "\n"
    exec(compile(source, f"<record {cls.__module__}.{cls.__qualname__}>", "exec"), names)  # noqa: S102 - dataclass does the same
    init: Callable[..., None] = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


class _HasFactory:
    """The stand-in default of a field with a default factory (dataclass's own ``_HAS_DEFAULT_FACTORY``)."""

    def __repr__(self) -> str:
        return "<factory>"


_HAS_FACTORY = _HasFactory()


def _first_init(cls: type) -> Callable[..., None]:
    """An ``__init__`` that compiles ``cls``'s generated one on its first call, puts it in place, and runs it."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init = cls.__dict__["__init__"]
        if init is __init__:  # not replaced yet (a subclass's call may come first: it is ours all the same)
            init = _generated_init(cls)
            type.__setattr__(cls, "__init__", init)
        init(self, *args, **kwargs)

    __init__.__qualname__ = f"{cls.__qualname__}.__init__"
    return __init__


def _check_order(cls: type) -> None:
    """Refuse what the generated ``__init__`` would refuse at declaration: a required field after a defaulted one."""
    defaulted = None
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only:
            continue
        if f.default is not MISSING or f.default_factory is not MISSING:
            defaulted = f.name
        elif defaulted is not None:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")


def _frozen(cls: type, init: Callable[[type], Callable[..., None]] | None) -> type:
    """``cls`` as a frozen, slotted dataclass with the shared methods; ``init`` makes its ``__init__`` (None: shared)."""
    if "__setattr__" in cls.__dict__ or "__delattr__" in cls.__dict__:
        raise TypeError(f"cannot overwrite attribute __setattr__ or __delattr__ in frozen record {cls.__name__}")
    if not cls.__doc__:
        # dataclass would write one from inspect.signature(cls), whose first call compiles tokenize's largest
        # pattern: ~14 M instructions, a twentieth of a CLI verb's start (issue 41).
        raise TypeError(f"record {cls.__name__} needs a docstring that says what it records")
    made: Any = dataclasses.dataclass(cls, init=False, repr=False, eq=False, frozen=False, slots=True)
    fields = dataclasses.fields(made)
    if len(fields) != len(made.__dataclass_fields__):
        raise TypeError(f"record {cls.__name__}: InitVar pseudo-fields need a generated dataclass")
    _check_order(made)
    made.__record_compared__ = staticmethod(_getter(tuple(f.name for f in fields if f.compare)))
    made.__record_hashed__ = staticmethod(_getter(tuple(
        f.name for f in fields if (f.compare if f.hash is None else f.hash))))
    made.__record_shown__ = tuple(f.name for f in fields if f.repr)
    type.__setattr__(made, "__init__", _shared_init if init is None else init(made))
    # As dataclass: a method the class defines itself stays (a __hash__ of None is Python's, for an own __eq__).
    own = {name for name in cls.__dict__ if name != "__hash__" or cls.__dict__[name] is not None}
    for name, method in (("__repr__", _repr), ("__eq__", _eq_of(made.__record_compared__)),
                         ("__hash__", _hash_of(made.__record_hashed__)), ("__setattr__", _setattr),
                         ("__delattr__", _delattr), ("__getstate__", _getstate), ("__setstate__", _setstate)):
        if name not in own:
            type.__setattr__(made, name, method)
    params = made.__dataclass_params__
    params.init = params.repr = params.eq = params.frozen = True  # what the class is, as dataclass records it
    return made


def _mutable(cls: type, slots: bool) -> type:
    """``cls`` as a (mutable) dataclass with the shared repr and equality, unhashable, and an ``__init__`` compiled
    when first used."""
    if "__setattr__" in cls.__dict__:
        raise TypeError(f"record {cls.__name__}: its __init__ sets fields as object does, past a __setattr__ of its own")
    if not cls.__doc__:
        raise TypeError(f"record {cls.__name__} needs a docstring that says what it records")
    made: Any = dataclasses.dataclass(cls, init=False, repr=False, eq=False, slots=slots)
    fields = dataclasses.fields(made)
    if len(fields) != len(made.__dataclass_fields__):
        raise TypeError(f"record {cls.__name__}: InitVar pseudo-fields need a generated dataclass")
    _check_order(made)
    made.__record_compared__ = staticmethod(_getter(tuple(f.name for f in fields if f.compare)))
    made.__record_shown__ = tuple(f.name for f in fields if f.repr)
    type.__setattr__(made, "__init__", _first_init(made))
    for name, method in (("__repr__", _repr), ("__eq__", _eq_of(made.__record_compared__))):
        if name not in cls.__dict__:
            type.__setattr__(made, name, method)
    if cls.__dict__.get("__hash__") is None:  # as dataclass's eq without frozen: unhashable, unless the class hashes
        type.__setattr__(made, "__hash__", None)
    params = made.__dataclass_params__
    params.init = params.repr = params.eq = True
    return made


def _record(**options: bool) -> Callable[[_C], _C]:
    """``@record(frozen=True, slots=True)``: that dataclass, with shared methods and an ``__init__`` compiled when first
    used; ``@record()`` and ``@record(slots=True)``: the mutable dataclass so (shared repr and equality, unhashable)."""
    if options == {"frozen": True, "slots": True}:
        return lambda cls: _frozen(cls, _first_init)  # type: ignore[return-value]
    if options in ({}, {"slots": True}):
        return lambda cls: _mutable(cls, bool(options))  # type: ignore[return-value]
    raise TypeError(f"a record is record(frozen=True, slots=True), record(slots=True) or record(), not {options}")


def _options(options: dict[str, bool]) -> None:
    if options != {"frozen": True, "slots": True}:
        raise TypeError(f"a setting is a frozen, slotted dataclass: setting(frozen=True, slots=True), not {options}")


def _setting(**options: bool) -> Callable[[_C], _C]:
    """``@setting(frozen=True, slots=True)``: that dataclass, with shared methods and a shared ``__init__``."""
    _options(options)
    return lambda cls: _frozen(cls, None)  # type: ignore[return-value]


if TYPE_CHECKING:
    from dataclasses import dataclass as record
    from dataclasses import dataclass as setting
else:
    record = _record
    setting = _setting
