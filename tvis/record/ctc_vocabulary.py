"""The characters a CTC model's classes mean, found in the script as a reader finds them.

A CTC model has no embedding of ids (its input is audio or images), and its class count is
the script's character map plus the blank, which the map usually leaves out: ``{c: i + 1}``
with 0 for the blank, a string ``" abcdefghijklmnopqrstuvwxyz'"`` indexed from 1, or a list
that names the blank itself (``"_"``, ``"<blank>"`` at 0). Any map of exactly the model's
classes (a tokenizer, an itos list: ``vocabulary.candidates``) is taken first; else one
that covers every class but the blank, the blank put in its place as ``<blank>``.
"""

from __future__ import annotations

import types

import torch

from tvis.record import vocabulary
from tvis.record.data import MAX_LABELS, is_id

BLANK = "<blank>"

# Names under which a string or list of characters is a character map (a string named
# ``path`` or ``text`` of the right length is not one).
_SEQUENCE_NAMES = ("char", "alphabet", "letter", "symbol", "vocab", "label", "token", "itos")
# Attribute levels read into the script's objects (a text transform's ``char_map``).
_DEPTH = 2


def settle(rec, classes: int, blank: int, frame) -> None:
    """Record the run's vocabulary for a CTC loss over ``classes`` classes with ``blank``:
    which map was used (``vocab_source``), or why none was (``vocab_why``)."""
    info = rec.data_info
    if "vocab_source" in info or "vocab_why" in info or not 2 <= classes <= MAX_LABELS:
        return
    if not 0 <= blank < classes:
        return
    known = info.get("vocab")
    if isinstance(known, list) and len(known) == classes:
        where = info.get("tokenizer", {}).get("cls", "tokenizer")
        info["vocab_source"] = f"vocabulary: the script's {where} ({classes} entries)"
        return
    for where, tokens, _ in vocabulary.candidates(frame, rec):
        if len(tokens) == classes:
            _take(info, tokens, f"vocabulary: {where} ({classes} entries)")
            return
    for where, tokens in _maps(frame, rec, classes, blank):
        _take(info, tokens, f"vocabulary: {where}")
        return
    info.pop("vocab", None)
    info["vocab_why"] = (
        f"no character map fits the CTC model's {classes} classes (blank {blank}): none of "
        f"{classes} entries, nor of {classes - 1} leaving the blank out, was found, so "
        "class ids are shown as numbers."
    )


def _take(info: dict, tokens: list[str], note: str) -> None:
    info["vocab"] = tokens
    info.pop("tokenizer", None)  # the blank is dropped by decoding, not as a special id
    info["vocab_source"] = note


def _maps(frame, rec, classes: int, blank: int):
    """(where, ``classes`` tokens in class order, the blank's among them) for each map in
    the project frames' variables, innermost frame first."""
    seen: set[int] = set()
    for where, variables in vocabulary.project_scopes(frame, rec):
        for name, value in variables:
            for label, tokens in _look(value, name, classes, blank, seen, 0):
                yield f"{label} in {where}", tokens


def _look(value, name: str, classes: int, blank: int, seen: set[int], depth: int):
    if isinstance(value, (str, list, tuple)):  # a map by its name: each name is looked at
        tokens = of_sequence(value, name, classes, blank)
        if tokens is not None:
            kind = "string" if isinstance(value, str) else "list"
            added = "" if len(value) == classes else f", blank {blank} added"
            yield f"{name} {kind} ({len(value)} entries{added})", tokens
        return
    if id(value) in seen or isinstance(value, _NOT_MAPS):
        return
    seen.add(id(value))
    if isinstance(value, dict):
        tokens = without_blank(value, classes, blank)
        if tokens is not None:
            yield f"{name} dict ({classes - 1} characters, blank {blank} added)", tokens
        return
    fields = getattr(value, "__dict__", None)
    if depth >= _DEPTH or not isinstance(fields, dict):
        return
    for attr, item in list(fields.items()):
        yield from _look(item, f"{name}.{attr}", classes, blank, seen, depth + 1)


# Values that hold no character map and are not looked into.
_NOT_MAPS = (
    torch.Tensor,
    torch.nn.Module,
    type,
    types.ModuleType,
    types.FunctionType,
    types.MethodType,
    bytes,
    int,
    float,
    bool,
    type(None),
)


def of_sequence(value, name: str, classes: int, blank: int) -> list[str] | None:
    """A named string or list of distinct characters (or tokens): all ``classes`` with the
    blank's own entry (``"_"`` at 0), or every class but the blank (indexed from 1)."""
    if len(value) not in (classes, classes - 1):
        return None
    if not any(stem in name.lower() for stem in _SEQUENCE_NAMES):
        return None
    tokens = list(value)
    if not all(isinstance(t, str) and t for t in tokens) or len(set(tokens)) != len(tokens):
        return None
    if len(tokens) == classes:
        return tokens
    if len(tokens) == classes - 1:
        return [*tokens[:blank], BLANK, *tokens[blank:]]
    return None


def without_blank(mapping: dict, classes: int, blank: int) -> list[str] | None:
    """The tokens of an id → token (or token → id) dict whose ids are every class but the
    blank, in class order with ``<blank>`` at the blank's; None for any other dict."""
    if len(mapping) != classes - 1:
        return None
    pairs = []
    for key, item in mapping.items():
        if is_id(key) and isinstance(item, str):
            pairs.append((key, item))
        elif isinstance(key, str) and is_id(item):
            pairs.append((item, key))
        else:
            return None
    if sorted(i for i, _ in pairs) != [i for i in range(classes) if i != blank]:
        return None
    tokens = [token for _, token in sorted(pairs)]
    return [*tokens[:blank], BLANK, *tokens[blank:]]
