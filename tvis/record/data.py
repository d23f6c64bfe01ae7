"""The data pipeline: DataLoader workers moved in-process, each batch's fetch recorded."""

from __future__ import annotations

from torch.utils.data import dataloader as dl

from tvis.record.extension import Extension


class DataPipeline(Extension):
    """Patches the DataLoader so batches are fetched in this process, where tvis sees them."""

    def install(self, recorder) -> None:
        self.recorder = recorder
        self.moved: set[int] = set()
        original_iterator = dl.DataLoader._get_iterator
        original_next = dl._BaseDataLoaderIter.__next__
        recorder.patches.set(dl.DataLoader, "_get_iterator", self._iterator(original_iterator))
        recorder.patches.set(dl._BaseDataLoaderIter, "__next__", self._next(original_next))

    def _iterator(self, original):
        def get_iterator(loader):
            if loader.num_workers == 0:
                return original(loader)
            workers, timeout = loader.num_workers, loader.timeout
            if id(loader) not in self.moved:
                self.moved.add(id(loader))
                self.recorder.notice(
                    f"a DataLoader's {workers} workers run in the main process under tvis, "
                    "so the data pipeline can be recorded.",
                    level="info",
                )
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
            if recorder.stopped:
                recorder.stop_again()
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
                    break


# Class names or vocabulary entries kept: a large LM vocabulary fits; anything bigger is
# not a label set a person reads.
MAX_LABELS = 300_000


def vocab_of(obj) -> list[str] | None:
    """Token strings by id, from a tokenizer-like object (``itos``, ``get_vocab()``, ``vocab``)."""
    if obj is None:
        return None
    try:
        itos = getattr(obj, "itos", None) or getattr(obj, "idx_to_token", None)
        if isinstance(itos, (list, tuple)) and itos and all(isinstance(t, str) for t in itos[:10]):
            return [str(t) for t in itos[:MAX_LABELS]]
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
