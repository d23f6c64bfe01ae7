"""The vocabulary a language model's ids mean, found the way a reader of the script finds it.

Once per run, at the first training batch's loss, the recorder looks where a person reading
the script would: the variables of the running project frames (the script's globals, the
training loop's locals, ``self`` of a trainer), one or two attributes deep into the objects
they hold (a dataset's ``itos``, a corpus's ``dictionary``, a trainer's ``tokenizer`` or
``processing_class``), the mappings a ``decode`` function reads, and a ``meta.pkl`` beside
the data folders the script names. A candidate is accepted only when its size agrees with
the model (the logits' last dimension, else an embedding's rows). ``data["vocab_source"]``
says which one was used; ``data["vocab_why"]`` says why none was.
"""

from __future__ import annotations

import io
import os
import pickle
import sys
import types
from collections.abc import Iterator

import torch

from tvis.record.data import MAX_LABELS, is_id, tokenizer_info, tokens_of_mapping, vocab_of

# Names under which a plain list of strings is a vocabulary (a list named ``sentences`` of
# the right length is not one); dicts are recognised by their shape, whatever their name.
_LIST_NAMES = ("itos", "vocab", "idx2", "id2", "chars", "words", "word_list", "tokens")
# Attributes followed from an object of the script's (a trainer, dataset, corpus).
_HOLDERS = (
    "tokenizer",
    "processing_class",
    "dictionary",
    "vocab",
    "dataset",
    "train_dataset",
    "data",
    "corpus",
    "encoder",
)
# Attributes of a script's object whose mapping is read (first levels only: a reader
# looks at a dataset's fields, not at everything reachable from it).
_DEPTH = 2
# A meta.pkl larger than this is not a vocabulary file.
_META_BYTES = 64 << 20


def settle(rec, classes: int | None) -> None:
    """Decide the run's vocabulary once: keep the one a tokenizer or dataset gave when it
    fits the model, else search the script; record which was used, or why none was."""
    info = rec.data_info
    if "vocab_source" in info or "vocab_why" in info:
        return
    sizes = _model_sizes(rec, classes)
    if not sizes:
        return  # no embedding of ids: not a language model
    known = info.get("vocab")
    if known and _fits(len(known), sizes):
        where = info.get("tokenizer", {}).get("cls", "tokenizer")
        info["vocab_source"] = f"vocabulary: the script's {where} ({len(known)} entries)"
        return
    misfits = []
    if known:
        misfits.append((f"{info.get('tokenizer', {}).get('cls', 'a tokenizer')}", len(known)))
    found = candidates(sys._getframe(1), rec)
    for where, tokens, holder in found:
        if _fits(len(tokens), sizes):
            info["vocab"] = tokens[:MAX_LABELS]
            if holder is not None:
                info["tokenizer"] = tokenizer_info(holder)
            else:
                info.pop("tokenizer", None)
            info["vocab_source"] = f"vocabulary: {where} ({len(tokens)} entries)"
            _settle_source(rec, found, tokens)
            return
        misfits.append((where, len(tokens)))
    info.pop("vocab", None)
    info["vocab_why"] = _why(misfits, sizes)


def _settle_source(rec, found: list, target: list[str]) -> None:
    """A translation model's second vocabulary: the one its encoder's ids index. When the
    model has an embedding of another size than the target vocabulary's (an encoder over
    the source language), the vocabulary that fits that embedding decodes the source."""
    sizes = {
        m.num_embeddings
        for root in list(rec.roots.values())
        for m in root.modules()
        if isinstance(m, torch.nn.Embedding) and not _fits(len(target), {m.num_embeddings})
    }
    if len(sizes) != 1:
        return  # no second embedding, or several: no one source side to name
    for where, tokens, _ in found:
        if tokens is not target and _fits(len(tokens), sizes):
            rec.data_info["source_vocab"] = tokens[:MAX_LABELS]
            rec.data_info["source_vocab_source"] = (
                f"source vocabulary: {where} ({len(tokens)} entries)"
            )
            return


def _why(misfits: list[tuple[str, int]], sizes: set[int]) -> str:
    size = max(sizes)
    if not misfits:
        return (
            f"no vocabulary was found for the model's {size} token ids (no tokenizer, "
            "itos/stoi-style mapping, decode function or meta.pkl beside the data), so "
            "token ids are shown as numbers."
        )
    seen = "; ".join(f"{where} has {n} entries" for where, n in misfits[:3])
    return f"no vocabulary fits the model's {size} token ids ({seen}), so ids are shown as numbers."


def _model_sizes(rec, classes: int | None) -> set[int]:
    """What a vocabulary's size must agree with: the logits' last dimension when the loss
    gave one, else the rows of the model's embeddings; nothing without an embedding, and
    nothing when the loss's classes are no embedding's rows: a classifier of token
    sequences (a sentiment head, a tagger, CLIP's batch-position targets) predicts classes
    that are not token ids."""
    rows = {
        m.num_embeddings
        for root in list(rec.roots.values())
        for m in root.modules()
        if isinstance(m, torch.nn.Embedding)
    }
    if not rows or (classes and classes not in rows):
        return set()
    return {classes} if classes else rows


def _fits(n: int, sizes: set[int]) -> bool:
    """Equal to the model's size, or short of it by the padding a model adds to reach a
    multiple of 64 (nanoGPT's 50304 rows for GPT-2's 50257 tokens)."""
    return any(n == s or (s % 64 == 0 and 0 < s - n < 128) for s in sizes)


def project_scopes(frame, rec) -> Iterator[tuple[str, list[tuple[str, object]]]]:
    """(where, its variables) for each of the project's frames from ``frame`` outwards:
    where a reader of the script would look for a vocabulary, innermost first."""
    while frame is not None:
        rel = rec.project.relpath(frame.f_code.co_filename)
        if rel is not None:
            code = frame.f_code
            scope = getattr(code, "co_qualname", code.co_name)
            where = f"{rel} globals" if scope == "<module>" else f"{rel} {scope}()"
            yield where, list(frame.f_locals.items())
        frame = frame.f_back


def candidates(frame, rec) -> list[tuple[str, list[str], object]]:
    """(where, tokens by id, tokenizer-like holder or None) for each vocabulary in sight,
    the likeliest first: tokenizers and id → token mappings, then token → id mappings,
    named lists, and meta.pkl files; innermost frame first within each."""
    seen: set[int] = set()
    found: list[tuple[int, str, list[str], object]] = []
    folders: list[str] = []
    for where, variables in project_scopes(frame, rec):
        for name, value in variables:
            found += _look(value, name, where, seen, 0)
            if isinstance(value, str) and len(value) < 4096:
                folders.append(value)
    found += [(_META, where, tokens, None) for where, tokens in _meta_files(folders)]
    found.sort(key=lambda c: c[0])  # stable: innermost first within a rank
    return [(where, tokens, holder) for _, where, tokens, holder in found]


# Ranks of the kinds of candidates: what a reader trusts first.
_HOLDER, _ID_TO_TOKEN, _TOKEN_TO_ID, _LIST, _META = range(5)


def _look(value, name: str, where: str, seen: set[int], depth: int) -> list:
    if id(value) in seen or isinstance(value, (torch.Tensor, torch.nn.Module, type)):
        return []
    seen.add(id(value))
    if isinstance(value, dict):
        tokens = tokens_of_mapping(value)
        if not tokens:
            return []
        rank = _ID_TO_TOKEN if is_id(next(iter(value))) else _TOKEN_TO_ID
        return [(rank, f"{name} dict in {where}", tokens, None)]
    if isinstance(value, (list, tuple)):
        if any(stem in name.lower() for stem in _LIST_NAMES) and _strings(value):
            return [(_LIST, f"{name} list in {where}", [str(t) for t in value], None)]
        return []
    if isinstance(value, (types.FunctionType, types.MethodType)):
        if name.startswith("decode"):
            return _read_by(getattr(value, "__func__", value), name, where, seen)
        return []
    if isinstance(value, (str, bytes, int, float, bool, types.ModuleType)) or value is None:
        return []
    tokens = vocab_of(value)
    if tokens:
        return [(_HOLDER, f"{name} ({type(value).__name__}) in {where}", tokens, value)]
    fields = getattr(value, "__dict__", None)
    if depth >= _DEPTH or not isinstance(fields, dict):
        return []
    found = []
    for attr, item in list(fields.items()):
        if isinstance(item, (dict, list, tuple)) or attr in _HOLDERS:
            found += _look(item, f"{name}.{attr}", where, seen, depth + 1)
    return found


def _read_by(fn, name: str, where: str, seen: set[int]) -> list:
    """The mappings a decode function reads: its closure's cells and the globals it names."""
    cells = [c.cell_contents for c in (fn.__closure__ or ()) if _filled(c)]
    names = [fn.__globals__.get(n) for n in fn.__code__.co_names]
    found = []
    for value in cells + names:
        if isinstance(value, dict) and id(value) not in seen:
            seen.add(id(value))
            tokens = tokens_of_mapping(value)
            if tokens:
                found.append((_ID_TO_TOKEN, f"the mapping {name}() reads in {where}", tokens, None))
    return found


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 (an empty cell raises)
    except ValueError:
        return False
    return True


def _strings(value) -> bool:
    return len(value) > 1 and all(isinstance(t, str) for t in value[:100])


def _meta_files(paths: list[str]) -> Iterator[tuple[str, list[str]]]:
    """``meta.pkl`` in the folders the script's variables name (or beside the files they
    name), as nanoGPT's prepare.py leaves it, read without running any code."""
    tried: set[str] = set()
    for path in paths:
        try:
            folder = path if os.path.isdir(path) else os.path.dirname(path)
            if not folder or not os.path.isdir(folder):
                continue
            meta = os.path.join(folder, "meta.pkl")
            real = os.path.realpath(meta)
            if real in tried or not os.path.isfile(meta):
                continue
            tried.add(real)
            if os.path.getsize(meta) > _META_BYTES:
                continue
            tokens = _meta_tokens(meta)
        except (OSError, ValueError):
            continue
        if tokens:
            yield f"meta.pkl beside the data in {folder}", tokens


def _meta_tokens(path: str) -> list[str] | None:
    with open(path, "rb") as f:
        try:
            meta = _PlainUnpickler(io.BytesIO(f.read())).load()
        except Exception:
            return None  # not plain data: never run what a pickle asks for
    if not isinstance(meta, dict):
        return None
    for key in ("itos", "stoi"):
        value = meta.get(key)
        if isinstance(value, dict):
            tokens = tokens_of_mapping(value)
            if tokens:
                return tokens
        if key == "itos" and isinstance(value, list) and _strings(value):
            return [str(t) for t in value]
    return None


class _PlainUnpickler(pickle.Unpickler):
    """Loads dicts, lists, strings and numbers only: any global a pickle names (a class,
    a function to call) is refused, so reading the file runs no code."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"{module}.{name} is not plain data")
