"""Checks a record read from disk against its shape in ``schema.py``, once, when it is loaded.

A run folder is data from elsewhere (another tvis version, a half-copied folder, a hand
edit). Checked here, a field of the wrong type becomes one sentence naming the file and the
field, and everything past the reader can trust the types it is given. Only the fields a
record has are checked: readers already treat a missing field as unknown.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Literal, Union

from tvis.store import schema

# A checker returns None when the value fits, else (where, what was expected); ``where``
# is built only on failure, so a record of thousands of calls is checked in milliseconds.
Checker = Callable[[Any], "tuple[str, str] | None"]


def problem(record: Any, kind: type, what: str, at: str = "") -> str | None:
    """One sentence saying what in ``record`` does not fit the TypedDict ``kind``, or None;
    ``at`` says where ``record`` sits in its file (``tensors[5]``)."""
    found = _checker(kind)(record)
    if found is None:
        return None
    where, expected = found
    got = _show(_at(record, where))
    where = (at + where).lstrip(".")
    return (
        f"{what} is corrupt: {where or 'it'} is {got}, not {expected}; re-record "
        "the run (or restore the file)."
    )


@cache
def _checker(hint: Any) -> Checker:
    if hint is Any:
        return lambda value: None
    if hint is None or hint is type(None):
        return _simple(lambda v: v is None, "null")
    if hint is bool:
        return _simple(lambda v: v is True or v is False, "true or false")
    if hint is int:
        return _simple(lambda v: type(v) is not bool and isinstance(v, int), "an integer")
    if hint is float:
        return _simple(lambda v: type(v) is not bool and isinstance(v, (int, float)), "a number")
    if hint is str:
        return _simple(lambda v: isinstance(v, str), "text")
    if typing.is_typeddict(hint):
        return _record(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Literal:
        return _simple(lambda v: v in args, " or ".join(repr(a) for a in args))
    if origin in (Union, types.UnionType):
        return _union([_checker(a) for a in args])
    if origin is list:
        return _items(
            _checker(args[0]) if args else _checker(Any), _exact(args[0]) if args else None
        )
    if origin is dict:
        return _values(_checker(args[1]) if args else _checker(Any))
    if hint in (list, dict):
        return _simple(lambda v: isinstance(v, hint), f"a {'list' if hint is list else 'map'}")
    raise TypeError(f"schema hint {hint!r} has no checker")


def _simple(test: Callable[[Any], bool], expected: str) -> Checker:
    failed = ("", expected)

    def check(value: Any):
        return None if test(value) else failed

    setattr(check, "test", test)  # noqa: B010 (lets a list of plain values be checked in one pass)
    return check


def _union(arms: list[Checker]) -> Checker:
    def check(value: Any):
        first = None
        for arm in arms:
            found = arm(value)
            if found is None:
                return None
            first = first or found
        return first

    return check


def _items(item: Checker, exact: frozenset[type] | None) -> Checker:
    test = getattr(item, "test", None)

    def check(value: Any):
        if not isinstance(value, list):
            return "", "a list"
        if exact is not None and exact.issuperset(map(type, value)):
            return None  # a shape, a list of ids: every item's type at C speed
        if test is not None and all(map(test, value)):
            return None
        for i, v in enumerate(value):
            found = item(v)
            if found is not None:
                return _join(f"[{i}]", found)
        return None

    return check


def _values(item: Checker) -> Checker:
    def check(value: Any):
        if not isinstance(value, dict):
            return "", "a map"
        for k, v in value.items():
            found = item(v)
            if found is not None:
                return _join(f".{k}", found)
        return None

    return check


def _record(kind: type) -> Checker:
    # Per field: the types that fit by type alone (checked without a call) and the checker
    # for anything else. Built at the first check: records may nest themselves.
    plan: dict[str, tuple[frozenset[type], Checker]] = {}
    nothing: frozenset[type] = frozenset()

    def check(value: Any):
        if not plan:
            hints = typing.get_type_hints(kind, globalns=vars(schema))
            plan.update((n, (_exact(h) or nothing, _checker(h))) for n, h in hints.items())
        if not isinstance(value, dict):
            return "", "a map"
        for name, v in value.items():
            rule = plan.get(name)
            if rule is None or type(v) in rule[0]:
                continue  # not in the schema, or the common case: no call per field
            found = rule[1](v)
            if found is not None:
                return _join(f".{name}", found)
        return None

    return check


def _exact(hint: Any) -> frozenset[type] | None:
    """The types a value decoded from msgpack may have to fit ``hint``, when its type alone
    decides (numbers, text, flags, null and unions of them); None when it takes more."""
    plain: dict[Any, set[type]] = {
        bool: {bool},
        int: {int},
        float: {int, float},
        str: {str},
        type(None): {type(None)},
    }
    if hint is None:
        hint = type(None)
    if hint in plain:
        return frozenset(plain[hint])
    if typing.get_origin(hint) in (Union, types.UnionType):
        arms = [_exact(a) for a in typing.get_args(hint)]
        if all(arm is not None for arm in arms):
            return frozenset(t for arm in arms if arm is not None for t in arm)
    return None


def _join(step: str, found: tuple[str, str]) -> tuple[str, str]:
    return step + found[0], found[1]


def _at(record: Any, where: str) -> Any:
    """The value at ``where`` (``.a[2].b``) inside ``record``, to show what was found."""
    value = record
    for part in where.replace("[", ".[").split(".")[1:]:
        if part.startswith("["):
            value = value[int(part[1:-1])]
        else:
            value = (
                value[part]
                if part in value
                else next(v for k, v in value.items() if str(k) == part)
            )
    return value


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
