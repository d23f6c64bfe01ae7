"""The data pipeline: DataLoader workers emulated in-process, each batch's fetch recorded.

Per batch, ``sections["data"]`` holds ``indices`` (the dataset index of each sample, as the
sampler gave them) and ``items``: for each sample, its index and the range of call ids
recorded while ``dataset[index]`` ran, so a sample's raw item, transform stages and
tokenizer calls can be found from its position in the batch.
"""

from __future__ import annotations

import contextlib
import operator

from torch.utils.data import dataloader as dl
from torch.utils.data._utils import fetch

from tvis.record.extension import Extension
from tvis.record.workers import WorkerEmulatingIter, can_emulate

# Dataset indices kept per batch: a batch of a few thousand samples keeps every index;
# a sampler yielding more per batch is not one a person steps through.
MAX_INDICES = 65536


class DataPipeline(Extension):
    """Patches the DataLoader so batches are fetched in this process, where tvis sees them."""

    def install(self, recorder) -> None:
        self.recorder = recorder
        self.moved: set[int] = set()
        original_iterator = dl.DataLoader._get_iterator
        original_next = dl._BaseDataLoaderIter.__next__
        original_index = dl._BaseDataLoaderIter._next_index
        original_fetch = fetch._MapDatasetFetcher.fetch
        recorder.patches.set(dl.DataLoader, "_get_iterator", self._iterator(original_iterator))
        recorder.patches.set(dl._BaseDataLoaderIter, "__next__", self._next(original_next))
        recorder.patches.set(dl._BaseDataLoaderIter, "_next_index", self._index(original_index))
        recorder.patches.set(fetch._MapDatasetFetcher, "fetch", self._fetch(original_fetch))
        emulated_index = WorkerEmulatingIter._next_index
        recorder.patches.set(WorkerEmulatingIter, "_next_index", self._index(emulated_index))

    @contextlib.contextmanager
    def unobserved(self):
        """Data work torch does out of sight (worker start-up, batches fetched ahead and
        dropped): no hook of tvis records it."""
        recorder = self.recorder
        paused, recorder.paused = recorder.paused, True
        try:
            with recorder.quiet():
                yield
        finally:
            recorder.paused = paused

    def _iterator(self, original):
        def get_iterator(loader):
            # Libraries the script imported after tvis started (torchvision, tokenizers)
            # are wrapped by now: the script builds its datasets before iterating them.
            for extension in self.recorder.extensions:
                refresh = getattr(extension, "refresh", None)
                if refresh is not None:
                    refresh(self.recorder)
            if loader.num_workers == 0:
                return original(loader)
            workers, timeout = loader.num_workers, loader.timeout
            emulate = can_emulate(loader)
            if id(loader) not in self.moved:
                self.moved.add(id(loader))
                self.recorder.notice(
                    f"a DataLoader's {workers} workers run in the main process under tvis, "
                    "so the data pipeline can be recorded"
                    + (
                        "; each keeps its own seeds, worker_init_fn, get_worker_info() and "
                        "dataset copy, so training is unchanged."
                        if emulate
                        else "; DataPipes are fetched without their worker sharding."
                    ),
                    level="info",
                )
            if emulate:
                return WorkerEmulatingIter(loader, self.unobserved)
            # The single-process iterator checks these two at construction only.
            loader.num_workers, loader.timeout = 0, 0
            try:
                return dl._SingleProcessDataLoaderIter(loader)
            finally:
                loader.num_workers, loader.timeout = workers, timeout

        return get_iterator

    def _next(self, original):
        recorder = self.recorder

        def next_batch(iterator):
            if recorder.stopped or recorder.stop_due:
                recorder.check_stop()
            with recorder.work:
                try:
                    recorder.data_begin()
                    self._remember_dataset(iterator)
                except Exception as e:
                    recorder.guard("noting a DataLoader batch", e)
            start = recorder.clock()
            try:
                data = original(iterator)
            except BaseException:
                recorder.in_data = max(0, recorder.in_data - 1)
                raise
            with recorder.work:
                try:
                    seconds = recorder.work.started - recorder.overhead - start
                    recorder.data_end([("batch", data)], seconds)
                except Exception as e:
                    recorder.guard("recording a DataLoader batch", e)
            return data

        return next_batch

    def _index(self, original):
        recorder = self.recorder

        def next_index(iterator):
            index = original(iterator)
            batch = recorder.batch
            if recorder.in_data and batch is not None and not recorder.busy:
                with recorder.work:
                    indices = index if isinstance(index, (list, tuple)) else [index]
                    kept = [_as_int(i) for i in indices[:MAX_INDICES]]
                    if kept and None not in kept:
                        batch.sections.setdefault("data", {})["indices"] = kept
            return index

        return next_index

    def _fetch(self, original):
        recorder = self.recorder

        def fetch_items(fetcher, possibly_batched_index):
            batch = recorder.batch
            if (
                not recorder.in_data
                or batch is None
                or recorder.busy
                or not fetcher.auto_collation
                or getattr(fetcher.dataset, "__getitems__", None)
            ):
                return original(fetcher, possibly_batched_index)
            # torch's own loop, with each item's position marked for the recorder.
            items = batch.sections.setdefault("data", {}).setdefault("items", [])
            data = []
            try:
                for position, idx in enumerate(possibly_batched_index):
                    batch.item = position
                    first = len(batch.calls)
                    if batch.keeps_item():
                        data.append(fetcher.dataset[idx])
                    else:
                        # Items past the kept samples run unobserved, at full speed.
                        with recorder.quiet():
                            data.append(fetcher.dataset[idx])
                    if position < MAX_INDICES:
                        items.append({"index": _plain(idx), "calls": [first, len(batch.calls)]})
            finally:
                batch.item = None
            return fetcher.collate_fn(data)

        return fetch_items

    def _remember_dataset(self, iterator) -> None:
        info = self.recorder.data_info
        dataset = iterator._dataset
        classes = getattr(dataset, "classes", None)
        if classes is not None and "classes" not in info:
            try:
                info["classes"] = [str(c) for c in list(classes)[:MAX_LABELS]]
            except TypeError:
                pass
        if "vocab" not in info:
            for holder in (dataset, getattr(dataset, "tokenizer", None)):
                vocab = vocab_of(holder)
                if vocab:
                    info["vocab"] = vocab
                    info.setdefault("tokenizer", tokenizer_info(holder))
                    break


# Class names or vocabulary entries kept: a large LM vocabulary fits; anything bigger is
# not a label set a person reads.
MAX_LABELS = 300_000


def vocab_of(obj) -> list[str] | None:
    """Token strings by id, from a tokenizer-like object (``itos`` as a list or dict,
    ``get_vocab()``, ``vocab``, SentencePiece's ``id_to_piece``, tiktoken's
    ``decode_single_token_bytes``)."""
    if obj is None:
        return None
    try:
        itos = getattr(obj, "itos", None) or getattr(obj, "idx_to_token", None)
        if isinstance(itos, (list, tuple)) and itos and all(isinstance(t, str) for t in itos[:10]):
            return [str(t) for t in itos[:MAX_LABELS]]
        if isinstance(itos, dict):
            return tokens_of_mapping(itos)
        pieces = _pieces(obj)
        if pieces:
            return pieces
        vocab = (
            obj.get_vocab()
            if callable(getattr(obj, "get_vocab", None))
            else getattr(obj, "vocab", None)
        )
        if isinstance(vocab, dict) and vocab and isinstance(next(iter(vocab)), str):
            size = min(max(vocab.values()) + 1, MAX_LABELS)
            tokens = [""] * size
            for token, i in vocab.items():
                if isinstance(i, int) and 0 <= i < size:
                    tokens[i] = token
            return tokens
    except Exception:
        return None
    return None


def _pieces(obj) -> list[str] | None:
    """The pieces of a SentencePiece processor or the byte tokens of a tiktoken encoding."""
    if callable(getattr(obj, "id_to_piece", None)) and callable(
        getattr(obj, "get_piece_size", None)
    ):
        n = min(int(obj.get_piece_size()), MAX_LABELS)
        return [str(obj.id_to_piece(i)) for i in range(n)]
    decode_one = getattr(obj, "decode_single_token_bytes", None)
    if callable(decode_one) and isinstance(getattr(obj, "n_vocab", None), int):
        tokens = []
        for i in range(min(obj.n_vocab, MAX_LABELS)):
            try:
                text = decode_one(i).decode("utf-8", errors="replace")
            except KeyError:  # an id between the ordinary and the special tokens
                text = ""
            # Spaces and newlines marked as byte-level BPE marks them (GPT-2's Ġ and Ċ),
            # so the viewer joins the tokens back into the text.
            tokens.append(text.replace(" ", "Ġ").replace("\n", "Ċ"))
        return tokens
    return None


def tokens_of_mapping(mapping: dict) -> list[str] | None:
    """Token strings by id from an id → token dict (``itos``, ``number_dict``,
    ``idx2word``) or a token → id dict (``stoi``, ``word_dict``, ``word2idx``) whose ids
    are exactly 0..n-1."""
    n = len(mapping)
    if n < 2 or n > MAX_LABELS:
        return None
    first = next(iter(mapping.items()))
    if is_id(first[0]) and isinstance(first[1], str):
        pairs = mapping.items()
    elif isinstance(first[0], str) and is_id(first[1]):
        pairs = ((i, t) for t, i in mapping.items())
    else:
        return None
    tokens: list[str | None] = [None] * n
    for i, token in pairs:
        if not is_id(i) or not isinstance(token, str) or not 0 <= i < n or tokens[i] is not None:
            return None
        tokens[i] = token
    return tokens  # type: ignore[return-value]  (n distinct ids below n fill every slot)


def is_id(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# Attribute stems naming a tokenizer's special tokens (``pad_id``, ``eos_token_id``, ...):
# markers a tokenizer's own ``decode`` leaves out of the text.
_SPECIAL_STEMS = ("pad", "bos", "eos", "sos", "cls", "sep", "mask", "start", "end")


def tokenizer_info(obj) -> dict:
    """``{"cls", "pad_id", "specials"}`` of a tokenizer-like object: its class, its padding
    id and the ids of its special tokens (so the viewer decodes text as its ``decode`` does)."""
    specials: set[int] = set()
    try:
        listed = getattr(obj, "all_special_ids", None)
        if isinstance(listed, (list, tuple)):  # transformers: its own list (its getters warn)
            specials.update(i for i in listed if isinstance(i, int))
        else:
            for stem in _SPECIAL_STEMS:
                for name in (f"{stem}_id", f"{stem}_idx"):
                    value = getattr(obj, name, None)
                    if isinstance(value, int) and not isinstance(value, bool):
                        specials.add(value)
        # Hugging Face's attribute name, on its tokenizers and on hand-written look-alikes.
        pad = getattr(obj, "pad_token_id", None)
        if pad is None:
            pad = getattr(obj, "pad_id", None)
        padding = getattr(obj, "padding", None)
        if pad is None and isinstance(padding, dict):
            pad = padding.get("pad_id")
    except Exception:
        pad = None
    return {
        "cls": type(obj).__name__,
        "pad_id": pad if isinstance(pad, int) else None,
        "specials": sorted(specials),
    }


def _as_int(value) -> int | None:
    try:
        return operator.index(value)
    except TypeError:
        return None


def _plain(idx):
    """A dataset index as msgpack can hold it (an int, else its short text)."""
    number = _as_int(idx)
    if number is not None:
        return number
    return idx[:80] if isinstance(idx, str) else f"<{type(idx).__name__}>"


def note_normalize(info: dict, transform) -> None:
    """Remember a Normalize stage's mean and std, so images can be shown un-normalized."""
    if "normalize" in info or "Normalize" not in type(transform).__name__:
        return
    try:
        mean = [float(v) for v in _as_list(transform.mean)]
        std = [float(v) for v in _as_list(transform.std)]
    except (AttributeError, TypeError, ValueError):
        return
    info["normalize"] = {"mean": mean, "std": std}


def _as_list(value) -> list:
    if hasattr(value, "reshape"):
        return value.reshape(-1).tolist()
    return list(value) if isinstance(value, (list, tuple)) else [value]
